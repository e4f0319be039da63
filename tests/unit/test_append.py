"""The append decision (PROTOCOL.md sections 5.2 and 5.2.1): precedence and closed streams."""

from __future__ import annotations

import pytest

from durable_streams_aws.core.protocol.append import (
    AppendDecision,
    AppendIntent,
    Verdict,
    WriteState,
    decide_append,
)
from durable_streams_aws.core.protocol.headers import ProducerClaim
from durable_streams_aws.core.protocol.producer import (
    ProducerOutcome,
    ProducerState,
    decide_producer,
)

JSON = "application/json"
TEXT = "text/plain"


def _state(
    content_type: str = TEXT,
    *,
    closed: bool = False,
    closed_by: ProducerClaim | None = None,
    last_stream_seq: str | None = None,
    producer: ProducerState | None = None,
) -> WriteState:
    return WriteState(content_type, closed, closed_by, last_stream_seq, producer)


def _intent(
    content_type: str | None = TEXT,
    *,
    has_body: bool = True,
    close: bool = False,
    stream_seq: str | None = None,
    producer: ProducerClaim | None = None,
) -> AppendIntent:
    return AppendIntent(content_type, has_body, close, stream_seq, producer)


def _claim(epoch: int, seq: int, producer_id: str = "A") -> ProducerClaim:
    return ProducerClaim(producer_id, epoch, seq)


# ---------------------------------------------------------------- the plain cases


def test_plain_append_commits() -> None:
    decision = decide_append(_state(), _intent())
    assert decision == AppendDecision(Verdict.COMMIT, None)
    assert decision.commits


def test_append_and_close_commits() -> None:
    assert decide_append(_state(), _intent(close=True)).verdict is Verdict.COMMIT


def test_close_only_on_open_stream_commits() -> None:
    assert decide_append(_state(), _intent(None, has_body=False, close=True)).commits


@pytest.mark.parametrize("verdict", [v for v in Verdict if v is not Verdict.COMMIT])
def test_only_commit_commits(verdict: Verdict) -> None:
    assert not AppendDecision(verdict).commits


# ---------------------------------------------------------------- precedence


PRECEDENCE = [
    # closed beats everything
    pytest.param(
        _state(JSON, closed=True, last_stream_seq="5", producer=ProducerState(1, 1)),
        _intent(TEXT, stream_seq="1", producer=_claim(1, 9, "B")),
        Verdict.CLOSED,
        id="closed-over-type-producer-seq",
    ),
    pytest.param(
        _state(JSON, closed=True, last_stream_seq="5"),
        _intent(TEXT, stream_seq="1"),
        Verdict.CLOSED,
        id="closed-over-type-and-seq",
    ),
    pytest.param(
        _state(closed=True, producer=ProducerState(3, 0)),
        _intent(producer=_claim(1, 0)),
        Verdict.CLOSED,
        id="closed-over-stale-epoch",
    ),
    # content type beats producer and Stream-Seq
    pytest.param(
        _state(JSON, last_stream_seq="5", producer=ProducerState(3, 0)),
        _intent(TEXT, stream_seq="1", producer=_claim(1, 0)),
        Verdict.CONTENT_TYPE_MISMATCH,
        id="type-over-stale-epoch-and-seq",
    ),
    pytest.param(
        _state(JSON, producer=ProducerState(1, 4)),
        _intent(TEXT, producer=_claim(1, 4)),
        Verdict.CONTENT_TYPE_MISMATCH,
        id="type-over-duplicate",
    ),
    pytest.param(
        _state(JSON, last_stream_seq="5"),
        _intent(TEXT, stream_seq="5"),
        Verdict.CONTENT_TYPE_MISMATCH,
        id="type-over-seq",
    ),
    # producer beats Stream-Seq
    pytest.param(
        _state(last_stream_seq="5", producer=ProducerState(3, 0)),
        _intent(stream_seq="1", producer=_claim(1, 0)),
        Verdict.STALE_EPOCH,
        id="stale-epoch-over-seq",
    ),
    pytest.param(
        _state(last_stream_seq="5", producer=ProducerState(1, 4)),
        _intent(stream_seq="1", producer=_claim(2, 3)),
        Verdict.EPOCH_NOT_AT_ZERO,
        id="epoch-not-at-zero-over-seq",
    ),
    pytest.param(
        _state(last_stream_seq="5", producer=ProducerState(1, 4)),
        _intent(stream_seq="1", producer=_claim(1, 9)),
        Verdict.SEQUENCE_GAP,
        id="gap-over-seq",
    ),
    pytest.param(
        _state(last_stream_seq="5", producer=ProducerState(1, 4)),
        _intent(stream_seq="1", producer=_claim(1, 4)),
        Verdict.DUPLICATE,
        id="duplicate-over-seq-regression",
    ),
    pytest.param(
        _state(last_stream_seq="5", producer=ProducerState(1, 4)),
        _intent(stream_seq="5", producer=_claim(1, 2)),
        Verdict.DUPLICATE,
        id="duplicate-over-equal-seq",
    ),
    # Stream-Seq last
    pytest.param(
        _state(last_stream_seq="5", producer=ProducerState(1, 4)),
        _intent(stream_seq="4", producer=_claim(1, 5)),
        Verdict.STREAM_SEQ_REGRESSION,
        id="seq-regression-with-accepted-producer",
    ),
    pytest.param(
        _state(last_stream_seq="5"),
        _intent(stream_seq="4"),
        Verdict.STREAM_SEQ_REGRESSION,
        id="seq-regression",
    ),
    pytest.param(
        _state(last_stream_seq="5", producer=ProducerState(1, 4)),
        _intent(stream_seq="6", producer=_claim(1, 5)),
        Verdict.COMMIT,
        id="all-good",
    ),
]


@pytest.mark.parametrize(("state", "intent", "verdict"), PRECEDENCE)
def test_precedence(state: WriteState, intent: AppendIntent, verdict: Verdict) -> None:
    assert decide_append(state, intent).verdict is verdict


@pytest.mark.parametrize(("state", "intent", "verdict"), PRECEDENCE)
def test_decision_carries_the_producer_decision(
    state: WriteState, intent: AppendIntent, verdict: Verdict
) -> None:
    decision = decide_append(state, intent)
    if intent.producer is None:
        assert decision.producer is None
    else:
        assert decision.producer == decide_producer(state.producer, intent.producer)


@pytest.mark.parametrize(
    ("outcome_state", "claim", "verdict"),
    [
        (ProducerState(3, 0), _claim(2, 0), Verdict.STALE_EPOCH),
        (ProducerState(3, 0), _claim(4, 1), Verdict.EPOCH_NOT_AT_ZERO),
        (ProducerState(3, 0), _claim(3, 2), Verdict.SEQUENCE_GAP),
        (None, _claim(0, 1), Verdict.SEQUENCE_GAP),
        (ProducerState(3, 5), _claim(3, 5), Verdict.DUPLICATE),
        (ProducerState(3, 5), _claim(3, 0), Verdict.DUPLICATE),
        (ProducerState(3, 5), _claim(3, 6), Verdict.COMMIT),
        (ProducerState(3, 5), _claim(4, 0), Verdict.COMMIT),
        (None, _claim(0, 0), Verdict.COMMIT),
    ],
)
def test_producer_outcomes_map_to_verdicts(
    outcome_state: ProducerState | None, claim: ProducerClaim, verdict: Verdict
) -> None:
    decision = decide_append(_state(producer=outcome_state), _intent(producer=claim))
    assert decision.verdict is verdict


def test_gap_decision_reports_expected_seq() -> None:
    decision = decide_append(_state(producer=ProducerState(0, 3)), _intent(producer=_claim(0, 7)))
    assert decision.verdict is Verdict.SEQUENCE_GAP
    assert decision.producer is not None
    assert decision.producer.expected_seq == 4


def test_accepted_producer_decision_carries_new_state() -> None:
    decision = decide_append(_state(producer=ProducerState(0, 3)), _intent(producer=_claim(0, 4)))
    assert decision.producer is not None
    assert decision.producer.outcome is ProducerOutcome.ACCEPT
    assert decision.producer.state == ProducerState(0, 4)


# ---------------------------------------------------------------- closed streams

CLOSER = _claim(2, 7, "A")

CLOSED_CASES = [
    # no producer headers
    pytest.param(
        _state(closed=True),
        _intent(None, has_body=False, close=True),
        Verdict.ALREADY_CLOSED,
        id="close-only-idempotent",
    ),
    pytest.param(
        _state(closed=True),
        _intent(TEXT, has_body=False, close=True),
        Verdict.ALREADY_CLOSED,
        id="close-only-with-type",
    ),
    pytest.param(
        _state(JSON, closed=True),
        _intent("image/png", has_body=False, close=True),
        Verdict.ALREADY_CLOSED,
        id="close-only-with-mismatched-type",
    ),
    pytest.param(
        _state(closed=True, last_stream_seq="9"),
        _intent(None, has_body=False, close=True, stream_seq="1"),
        Verdict.ALREADY_CLOSED,
        id="close-only-with-old-stream-seq",
    ),
    pytest.param(_state(closed=True), _intent(), Verdict.CLOSED, id="append"),
    pytest.param(_state(closed=True), _intent(close=True), Verdict.CLOSED, id="append-and-close"),
    pytest.param(
        _state(JSON, closed=True), _intent(TEXT), Verdict.CLOSED, id="append-mismatched-type"
    ),
    pytest.param(
        _state(closed=True, last_stream_seq="1"),
        _intent(stream_seq="2"),
        Verdict.CLOSED,
        id="append-with-next-stream-seq",
    ),
    # the producer that closed the stream
    pytest.param(
        _state(closed=True, closed_by=CLOSER, producer=ProducerState(2, 7)),
        _intent(close=True, producer=CLOSER),
        Verdict.DUPLICATE,
        id="retry-of-closing-append",
    ),
    pytest.param(
        _state(closed=True, closed_by=CLOSER, producer=ProducerState(2, 7)),
        _intent(None, has_body=False, close=True, producer=CLOSER),
        Verdict.DUPLICATE,
        id="retry-of-closing-close-only",
    ),
    pytest.param(
        _state(closed=True, closed_by=CLOSER, producer=None),
        _intent(close=True, producer=CLOSER),
        Verdict.DUPLICATE,
        id="retry-of-closing-without-producer-state",
    ),
    pytest.param(
        _state(closed=True, closed_by=CLOSER, producer=ProducerState(2, 7)),
        _intent(producer=_claim(2, 5, "A")),
        Verdict.DUPLICATE,
        id="retry-of-earlier-batch",
    ),
    pytest.param(
        _state(closed=True, closed_by=CLOSER, producer=ProducerState(2, 7)),
        _intent(close=True, producer=_claim(2, 8, "A")),
        Verdict.CLOSED,
        id="same-producer-next-seq",
    ),
    pytest.param(
        _state(closed=True, closed_by=CLOSER, producer=ProducerState(2, 7)),
        _intent(close=True, producer=_claim(3, 0, "A")),
        Verdict.CLOSED,
        id="same-producer-new-epoch",
    ),
    pytest.param(
        _state(closed=True, closed_by=CLOSER, producer=ProducerState(2, 7)),
        _intent(close=True, producer=_claim(1, 7, "A")),
        Verdict.CLOSED,
        id="same-producer-stale-epoch",
    ),
    # another producer
    pytest.param(
        _state(closed=True, closed_by=CLOSER, producer=None),
        _intent(close=True, producer=_claim(0, 0, "B")),
        Verdict.CLOSED,
        id="other-producer-append-and-close",
    ),
    pytest.param(
        _state(closed=True, closed_by=CLOSER, producer=None),
        _intent(producer=_claim(2, 7, "B")),
        Verdict.CLOSED,
        id="other-producer-same-numbers",
    ),
    pytest.param(
        _state(closed=True, closed_by=CLOSER, producer=ProducerState(0, 3)),
        _intent(producer=_claim(0, 4, "B")),
        Verdict.CLOSED,
        id="other-producer-next-seq",
    ),
    pytest.param(
        _state(closed=True, closed_by=CLOSER, producer=ProducerState(0, 3)),
        _intent(producer=_claim(0, 3, "B")),
        Verdict.DUPLICATE,
        id="other-producer-retry-of-committed-batch",
    ),
    # A producer's close-only on a stream someone else closed meets the closed stream; the
    # spec is ambiguous here (5.2 "close-only is idempotent" vs 5.2.1 "otherwise 409").
    pytest.param(
        _state(closed=True, closed_by=CLOSER, producer=None),
        _intent(None, has_body=False, close=True, producer=_claim(0, 0, "B")),
        Verdict.CLOSED,
        id="other-producer-close-only",
    ),
    # closed without a producer
    pytest.param(
        _state(closed=True, closed_by=None, producer=None),
        _intent(close=True, producer=_claim(0, 0, "A")),
        Verdict.CLOSED,
        id="producer-on-stream-closed-without-producer",
    ),
]


@pytest.mark.parametrize(("state", "intent", "verdict"), CLOSED_CASES)
def test_closed_stream(state: WriteState, intent: AppendIntent, verdict: Verdict) -> None:
    decision = decide_append(state, intent)
    assert decision.verdict is verdict
    assert not decision.commits


# ---------------------------------------------------------------- content type


@pytest.mark.parametrize(
    ("stream_type", "request_type", "verdict"),
    [
        (JSON, JSON, Verdict.COMMIT),
        (JSON, "Application/JSON", Verdict.COMMIT),
        (JSON, "application/json; charset=utf-8", Verdict.COMMIT),
        ("application/json; charset=utf-8", JSON, Verdict.COMMIT),
        (TEXT, "text/plain; charset=utf-8", Verdict.COMMIT),
        ("TEXT/PLAIN", " text/plain ", Verdict.COMMIT),
        (JSON, TEXT, Verdict.CONTENT_TYPE_MISMATCH),
        (JSON, "application/ndjson", Verdict.CONTENT_TYPE_MISMATCH),
        (TEXT, "text/html", Verdict.CONTENT_TYPE_MISMATCH),
        ("application/octet-stream", TEXT, Verdict.CONTENT_TYPE_MISMATCH),
        (TEXT, "", Verdict.CONTENT_TYPE_MISMATCH),
        (TEXT, None, Verdict.CONTENT_TYPE_MISMATCH),
    ],
)
def test_content_type_with_body(
    stream_type: str, request_type: str | None, verdict: Verdict
) -> None:
    assert decide_append(_state(stream_type), _intent(request_type)).verdict is verdict


@pytest.mark.parametrize("request_type", [None, "", TEXT, "image/png", "application/ndjson"])
@pytest.mark.parametrize("stream_type", [JSON, TEXT, "application/octet-stream"])
def test_close_only_with_empty_body_ignores_content_type(
    stream_type: str, request_type: str | None
) -> None:
    decision = decide_append(_state(stream_type), _intent(request_type, has_body=False, close=True))
    assert decision.verdict is Verdict.COMMIT


# ---------------------------------------------------------------- Stream-Seq


@pytest.mark.parametrize(
    ("last", "new", "verdict"),
    [
        (None, "1", Verdict.COMMIT),
        (None, "", Verdict.COMMIT),
        ("5", None, Verdict.COMMIT),
        ("1", "2", Verdict.COMMIT),
        ("2", "10", Verdict.STREAM_SEQ_REGRESSION),  # byte-wise, not numeric
        ("09", "10", Verdict.COMMIT),
        ("10", "09", Verdict.STREAM_SEQ_REGRESSION),
        ("9", "10", Verdict.STREAM_SEQ_REGRESSION),
        ("5", "5", Verdict.STREAM_SEQ_REGRESSION),
        ("5", "4", Verdict.STREAM_SEQ_REGRESSION),
        ("abc", "abd", Verdict.COMMIT),
        ("abc", "abcd", Verdict.COMMIT),  # a longer string with the same prefix is greater
        ("abcd", "abc", Verdict.STREAM_SEQ_REGRESSION),
        ("", "a", Verdict.COMMIT),
        ("a", "", Verdict.STREAM_SEQ_REGRESSION),
        ("Z", "a", Verdict.COMMIT),  # upper case sorts before lower case
        ("a", "Z", Verdict.STREAM_SEQ_REGRESSION),
        ("a", "A", Verdict.STREAM_SEQ_REGRESSION),
        ("2024-01-01T00:00:00Z", "2024-01-01T00:00:01Z", Verdict.COMMIT),
        ("0000000000000000_0000000000000009", "0000000000000000_0000000000000010", Verdict.COMMIT),
        ("z", "\u00e9", Verdict.COMMIT),  # UTF-8 0xC3 0xA9 > 0x7A
        ("\u00e9", "z", Verdict.STREAM_SEQ_REGRESSION),
        ("\uffff", "\U00010000", Verdict.COMMIT),  # 0xEF... < 0xF0... in UTF-8
        ("\U00010000", "\uffff", Verdict.STREAM_SEQ_REGRESSION),
    ],
)
def test_stream_seq_byte_wise_lexicographic(
    last: str | None, new: str | None, verdict: Verdict
) -> None:
    decision = decide_append(_state(last_stream_seq=last), _intent(stream_seq=new))
    assert decision.verdict is verdict


@pytest.mark.parametrize(
    ("last", "new"),
    [("2", "10"), ("09", "10"), ("a", "b"), ("z", "\u00e9"), ("\uffff", "\U00010000"), ("x", "x")],
)
def test_stream_seq_agrees_with_bytes_comparison(last: str, new: str) -> None:
    decision = decide_append(_state(last_stream_seq=last), _intent(stream_seq=new))
    expected = Verdict.COMMIT if new.encode() > last.encode() else Verdict.STREAM_SEQ_REGRESSION
    assert decision.verdict is expected


def test_stream_seq_on_close_only_of_open_stream_is_checked() -> None:
    decision = decide_append(
        _state(last_stream_seq="5"), _intent(None, has_body=False, close=True, stream_seq="3")
    )
    assert decision.verdict is Verdict.STREAM_SEQ_REGRESSION
