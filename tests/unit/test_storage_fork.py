"""Fork resolution (`core.storage._fork`) against an in-memory source: where a fork
diverges, and why a fork is refused."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from durable_streams_aws.core.storage import (
    CreateOutcome,
    CreateSpec,
    CreateStatus,
    ForkRequest,
    ReadBatch,
    StreamInfo,
)
from durable_streams_aws.core.storage._fork import new_stream_settings, resolve_fork

MESSAGES = (b"[1]", b"[22]", b"[333]")  # positions 0, 3, 7; tail 12
SOURCE = StreamInfo(
    path="src",
    incarnation="inc-src",
    content_type="application/json",
    tail=12,
    closed=False,
    closed_by=None,
    last_stream_seq=None,
    ttl_seconds=30,
    expires_at=None,
    last_access=0.0,
    created_at=0.0,
)


class Source:
    """A source stream holding `MESSAGES`."""

    def __init__(self, info: StreamInfo | None) -> None:
        self.info = info
        self.reads: list[tuple[int, int]] = []

    def get(self, path: str) -> StreamInfo | None:
        return self.info if self.info is not None and path == self.info.path else None

    def read(self, info: StreamInfo, start: int, max_bytes: int, whole: bool = False) -> ReadBatch:
        """The whole messages that start at or after `start`, at least one, within
        `max_bytes` (a read from inside a message skips the rest of it)."""
        self.reads.append((start, max_bytes))
        position, end, taken = 0, start, []
        for message in MESSAGES:
            if position >= start and (not taken or end - start + len(message) <= max_bytes):
                taken.append(message)
                end = position + len(message)
            position += len(message)
        return ReadBatch(start, end, messages=tuple(taken))


def fork(anchor: int | None, sub_offset: int = 0, content_type: str | None = None) -> Any:
    spec = CreateSpec(content_type, fork=ForkRequest("src", anchor, sub_offset))
    assert spec.fork is not None
    return spec, spec.fork


@pytest.mark.parametrize(
    ("anchor", "sub_offset", "expected"),
    [
        (None, 0, 12),  # at the tail
        (0, 0, 0),
        (3, 0, 3),
        (0, 2, 7),  # two messages past the start
        (3, 2, 12),
    ],
)
def test_a_json_fork_diverges_on_a_message_boundary(
    anchor: int | None, sub_offset: int, expected: int
) -> None:
    source = Source(SOURCE)
    assert resolve_fork(source, *fork(anchor, sub_offset)) == (SOURCE, expected)


@pytest.mark.parametrize(
    ("info", "anchor", "sub_offset", "content_type", "status"),
    [
        (None, None, 0, None, CreateStatus.SOURCE_NOT_FOUND),
        (replace(SOURCE, soft_deleted=True), None, 0, None, CreateStatus.SOURCE_GONE),
        (SOURCE, None, 0, "text/plain", CreateStatus.CONTENT_TYPE_MISMATCH),
        (SOURCE, 13, 0, None, CreateStatus.OFFSET_BEYOND_TAIL),
        (SOURCE, 4, 0, None, CreateStatus.OFFSET_NOT_A_BOUNDARY),
        (SOURCE, 3, 3, None, CreateStatus.SUB_OFFSET_OVERSHOOT),
        (
            replace(SOURCE, content_type="text/plain"),
            10,
            3,
            None,
            CreateStatus.SUB_OFFSET_OVERSHOOT,
        ),
    ],
)
def test_a_fork_is_refused_with_its_reason(
    info: StreamInfo | None,
    anchor: int | None,
    sub_offset: int,
    content_type: str | None,
    status: CreateStatus,
) -> None:
    outcome = resolve_fork(Source(info), *fork(anchor, sub_offset, content_type))
    assert isinstance(outcome, CreateOutcome)
    assert outcome.status is status


def test_a_byte_fork_counts_bytes_and_reads_nothing() -> None:
    text = replace(SOURCE, content_type="text/plain; charset=utf-8")
    source = Source(text)
    assert resolve_fork(source, *fork(4, 5, "text/plain")) == (text, 9)
    assert source.reads == []


def test_a_fork_takes_its_source_s_content_type_and_expiry_unless_it_asks() -> None:
    spec = CreateSpec(None, fork=ForkRequest("src", None))
    assert new_stream_settings(spec, SOURCE) == ("application/json", 30, None)
    own = CreateSpec(None, expires_at=99.0, fork=ForkRequest("src", None))
    assert new_stream_settings(own, SOURCE) == ("application/json", None, 99.0)
    assert new_stream_settings(CreateSpec(None, ttl_seconds=5), None) == (
        "application/octet-stream",
        5,
        None,
    )


def test_a_stream_read_up_to_a_position_ends_its_own_data_there() -> None:
    """`StreamInfo.ending_at`: a read bounded inside the stream's own data sees it end at the
    bound; at or past the tail, or inside what a fork inherited, it is the stream as it is."""
    fork = replace(
        SOURCE,
        path="fork",
        incarnation="inc-fork",
        tail=30,
        fork_position=12,
        inherited=SOURCE.segments_until(12),
    )
    bounded = fork.ending_at(20)
    assert bounded.segments() == (*fork.inherited, replace(fork.segments()[-1], end=20))
    assert replace(bounded, tail=fork.tail) == fork  # nothing else differs
    for unchanged in (30, 31, 11, 0):
        assert fork.ending_at(unchanged) is fork
    assert fork.ending_at(12).segments()[-1].end == 12  # its own data, empty
    assert SOURCE.ending_at(7).segments() == (replace(SOURCE.segments()[0], end=7),)
