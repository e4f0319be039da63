"""Building HTTP responses from store outcomes and protocol decisions."""

from __future__ import annotations

import json
import time

from starlette.responses import Response

from ..auth.decision import Refused
from ..protocol import caching
from ..protocol.append import AppendIntent, Verdict
from ..protocol.errors import ProtocolError
from ..protocol.headers import (
    PRODUCER_EPOCH,
    PRODUCER_EXPECTED_SEQ,
    PRODUCER_RECEIVED_SEQ,
    PRODUCER_SEQ,
    STREAM_CLOSED,
    STREAM_EARLIEST_OFFSET,
    STREAM_EXPIRES_AT,
    STREAM_NEXT_OFFSET,
    STREAM_RETENTION,
    STREAM_TTL,
    format_expires_at,
)
from ..protocol.jsonmode import join_lines, join_messages
from ..protocol.offsets import format_offset
from ..protocol.producer import ProducerState
from ..storage.model import (
    AppendOutcome,
    CreateOutcome,
    CreateStatus,
    ReadBatch,
    Retained,
    StreamInfo,
)
from .disconnect import CLIENT_CLOSED_REQUEST


def error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response:
    body = json.dumps({"error": code, "message": message})
    return Response(
        body,
        status_code=status,
        media_type="application/json",
        headers={"Cache-Control": caching.NO_STORE, **(headers or {})},
    )


def unavailable(message: str, retry_after: int) -> Response:
    return error(503, "unavailable", message, {"Retry-After": str(retry_after)})


def bodyless(response: Response) -> Response:
    """HEAD answers carry the status and headers of the GET, never a body."""
    headers = {k: v for k, v in response.headers.items() if k.lower() != "content-length"}
    return Response(status_code=response.status_code, headers=headers)


def client_gone() -> Response:
    """For the log only: the client closed the connection while its request waited."""
    return Response(status_code=CLIENT_CLOSED_REQUEST, headers={"Cache-Control": caching.NO_STORE})


def refused(refusal: Refused) -> Response:
    """An access-control refusal: 401 or 403, with the challenge where one applies."""
    headers = {"WWW-Authenticate": refusal.challenge} if refusal.challenge else None
    return error(refusal.status, refusal.code, refusal.message, headers)


_ERROR_CODES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    410: "gone",
    413: "payload_too_large",
    415: "unsupported_media_type",
    501: "not_implemented",
    503: "unavailable",
}


def error_code(status: int) -> str:
    return _ERROR_CODES.get(status, "error")


def protocol_error(exc: ProtocolError) -> Response:
    return error(exc.status, error_code(exc.status), exc.message, exc.headers)


def not_found() -> Response:
    return error(404, "not_found", "stream not found")


def gone() -> Response:
    return error(410, "gone", "stream was deleted; only its forks still read its data")


def read_body(batch: ReadBatch) -> bytes:
    """What a read serves: a JSON array of the messages, or the bytes."""
    return join_messages(list(batch.messages)) if batch.messages is not None else batch.data


def read_body_lines(batch: ReadBatch) -> bytes:
    """`read_body`, a JSON stream's messages laid out a line each where they can be."""
    return join_lines(batch.messages) if batch.messages is not None else batch.data


_CREATE_REJECTIONS = {
    CreateStatus.CONFLICT: (
        409,
        "stream_exists",
        "a stream with a different configuration exists at this path",
    ),
    CreateStatus.SOURCE_NOT_FOUND: (404, "source_not_found", "the fork source does not exist"),
    CreateStatus.SOURCE_GONE: (409, "source_deleted", "the fork source has been deleted"),
    CreateStatus.CONTENT_TYPE_MISMATCH: (
        409,
        "content_type_mismatch",
        "a fork's content type must be its source's",
    ),
    CreateStatus.OFFSET_BEYOND_TAIL: (
        400,
        "fork_offset_beyond_tail",
        "Stream-Fork-Offset is past the source's tail",
    ),
    CreateStatus.OFFSET_NOT_A_BOUNDARY: (
        400,
        "fork_offset_not_a_boundary",
        "Stream-Fork-Offset falls inside a message of the JSON source",
    ),
    CreateStatus.OFFSET_GONE: (
        410,
        "fork_offset_gone",
        "Stream-Fork-Offset is before the source's earliest retained offset",
    ),
    CreateStatus.SUB_OFFSET_OVERSHOOT: (
        400,
        "fork_sub_offset_overshoot",
        "Stream-Fork-Sub-Offset is past the source's data",
    ),
}


def create_response(outcome: CreateOutcome, location: str) -> Response:
    """The response to a PUT: 201 with the new stream's Location, 200 when it already
    existed as asked, or why it could not be created."""
    if outcome.status in _CREATE_REJECTIONS:
        status, code, message = _CREATE_REJECTIONS[outcome.status]
        if outcome.status is CreateStatus.CONFLICT and outcome.info and outcome.info.soft_deleted:
            message = "a deleted stream with live forks still holds this path"
        extra = {}
        if outcome.status is CreateStatus.OFFSET_GONE and outcome.info is not None:
            extra = {STREAM_EARLIEST_OFFSET: outcome.info.retained_now(time.time()).earliest_offset}
        return error(status, code, message, extra)
    assert outcome.info is not None
    headers = stream_headers(outcome.info)
    if outcome.status is CreateStatus.CREATED:
        return Response(status_code=201, headers={**headers, "Location": location})
    return Response(status_code=200, headers=headers)


def offset_headers(position: int, closed: bool, inside: bool = False) -> dict[str, str]:
    """Where the client stands (`inside` an append, when a response was cut there), and
    whether that is the end of a closed stream."""
    headers = {STREAM_NEXT_OFFSET: format_offset(position, inside)}
    if closed:
        headers[STREAM_CLOSED] = "true"
    return headers


def tail_headers(info: StreamInfo) -> dict[str, str]:
    return offset_headers(info.tail, info.closed)


def stream_headers(info: StreamInfo) -> dict[str, str]:
    """Content type, tail and closure (and a retention policy, where retained data starts):
    shared by create, HEAD and write responses."""
    return {"Content-Type": info.content_type, **tail_headers(info), **retention_headers(info)}


def retention_headers(info: StreamInfo) -> dict[str, str]:
    """The stream's retention policy, and where reads may start once it dropped anything."""
    headers = {}
    if info.retention is not None:
        headers[STREAM_RETENTION] = info.retention
    retained = info.retained_now(time.time())
    if retained.dropped:
        headers[STREAM_EARLIEST_OFFSET] = retained.earliest_offset
    return headers


def offset_gone(asked: str, retained: Retained) -> Response:
    """410 for a read below where the stream's retained data starts: the body and a header
    name the earliest offset a read may start at. Not kept by caches, as no error is: the
    stream at this path may be deleted and created again, and then hold that offset."""
    earliest = retained.earliest_offset
    body = json.dumps(
        {
            "error": "offset_gone",
            "message": f"offset {asked} is before the earliest retained offset {earliest}: "
            "retention dropped what was there; read on from the earliest offset",
            "earliest_offset": earliest,
        }
    )
    return Response(
        body,
        status_code=410,
        media_type="application/json",
        headers={"Cache-Control": caching.NO_STORE, STREAM_EARLIEST_OFFSET: earliest},
    )


def metadata_headers(info: StreamInfo) -> dict[str, str]:
    headers = stream_headers(info)
    if info.ttl_seconds is not None:
        headers[STREAM_TTL] = str(info.ttl_seconds)
    if info.expires_at is not None:
        headers[STREAM_EXPIRES_AT] = format_expires_at(info.expires_at)
    return headers


def _producer_headers(state: ProducerState | None) -> dict[str, str]:
    if state is None:
        return {}
    return {PRODUCER_EPOCH: str(state.epoch), PRODUCER_SEQ: str(state.last_seq)}


def _expected_seq(outcome: AppendOutcome, intent: AppendIntent) -> int:
    decision = outcome.decision
    if (
        decision is not None
        and decision.producer is not None
        and decision.producer.expected_seq is not None
    ):
        return decision.producer.expected_seq
    state = outcome.producer
    claim = intent.producer
    if state is not None and claim is not None and claim.epoch == state.epoch:
        return state.last_seq + 1
    return 0


def append_response(outcome: AppendOutcome, intent: AppendIntent) -> Response:
    """The response to a POST, from what the store decided (and committed)."""
    decision = outcome.decision
    info = outcome.info
    assert decision is not None and info is not None
    verdict = decision.verdict
    if verdict is Verdict.COMMIT:
        status = 200 if intent.producer is not None and intent.has_body else 204
        headers = {**tail_headers(info), **_producer_headers(outcome.producer)}
        return Response(status_code=status, headers=headers)
    if verdict is Verdict.DUPLICATE:
        headers = {**tail_headers(info), **_producer_headers(outcome.producer)}
        return Response(status_code=204, headers=headers)
    if verdict is Verdict.ALREADY_CLOSED:
        return Response(status_code=204, headers=tail_headers(info))

    producer_conflict: dict[str, str] = {}
    if intent.producer is not None:
        producer_conflict = {
            PRODUCER_EXPECTED_SEQ: str(_expected_seq(outcome, intent)),
            PRODUCER_RECEIVED_SEQ: str(intent.producer.seq),
        }
    if verdict is Verdict.CLOSED:
        return error(
            409,
            "stream_closed",
            "the stream is closed",
            {**tail_headers(info), **producer_conflict},
        )
    if verdict is Verdict.CONTENT_TYPE_MISMATCH:
        return error(
            409,
            "content_type_mismatch",
            f"the stream's content type is {info.content_type}",
            producer_conflict,
        )
    if verdict is Verdict.STREAM_SEQ_REGRESSION:
        return error(
            409,
            "stream_seq_regression",
            # "Sequence conflict": the words upstream clients tell this 409 from others by.
            "Sequence conflict: Stream-Seq must be greater than the last one written",
            producer_conflict,
        )
    if verdict is Verdict.SEQUENCE_GAP:
        return error(409, "producer_sequence_gap", "producer sequence gap", producer_conflict)
    if verdict is Verdict.STALE_EPOCH:
        current = outcome.producer.epoch if outcome.producer else 0
        return error(
            403,
            "stale_producer_epoch",
            "a newer producer epoch has taken over",
            {PRODUCER_EPOCH: str(current)},
        )
    if verdict is Verdict.EPOCH_NOT_AT_ZERO:
        return error(400, "bad_producer_seq", "a new producer epoch must start at Producer-Seq 0")
    raise AssertionError(f"unhandled verdict {verdict}")
