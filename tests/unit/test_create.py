"""Idempotent create (PROTOCOL.md section 5.1): does an existing stream match the PUT?"""

from __future__ import annotations

import dataclasses

import pytest

from durable_streams_aws.core.protocol.create import StreamConfig

EXPIRES = 1_893_456_000.0  # 2030-01-01T00:00:00Z

BASE = StreamConfig("application/json", None, None, False)


def _config(**changes: object) -> StreamConfig:
    return dataclasses.replace(BASE, **changes)


@pytest.mark.parametrize(
    ("existing", "requested", "matches"),
    [
        # identical
        pytest.param(BASE, BASE, True, id="identical"),
        # content type: case and parameters are ignored, the media type is not
        pytest.param(_config(), _config(content_type="Application/JSON"), True, id="type-case"),
        pytest.param(
            _config(),
            _config(content_type="application/json; charset=utf-8"),
            True,
            id="type-params",
        ),
        pytest.param(
            _config(content_type="application/json; charset=utf-8"),
            _config(content_type="APPLICATION/JSON;charset=UTF-8"),
            True,
            id="type-both-params",
        ),
        pytest.param(_config(), _config(content_type=" application/json "), True, id="type-ws"),
        pytest.param(_config(), _config(content_type="text/plain"), False, id="type-differs"),
        pytest.param(
            _config(), _config(content_type="application/ndjson"), False, id="type-ndjson"
        ),
        pytest.param(
            _config(content_type="application/octet-stream"),
            _config(content_type="text/plain"),
            False,
            id="type-octet-vs-text",
        ),
        # ttl
        pytest.param(_config(ttl_seconds=60), _config(ttl_seconds=60), True, id="ttl-same"),
        pytest.param(_config(ttl_seconds=0), _config(ttl_seconds=0), True, id="ttl-zero"),
        pytest.param(_config(ttl_seconds=60), _config(ttl_seconds=61), False, id="ttl-differs"),
        pytest.param(_config(ttl_seconds=60), _config(), False, id="ttl-vs-none"),
        pytest.param(_config(), _config(ttl_seconds=60), False, id="none-vs-ttl"),
        pytest.param(_config(ttl_seconds=0), _config(), False, id="ttl-zero-vs-none"),
        # expires_at
        pytest.param(
            _config(expires_at=EXPIRES), _config(expires_at=EXPIRES), True, id="expiry-same"
        ),
        pytest.param(
            _config(expires_at=EXPIRES),
            _config(expires_at=EXPIRES + 0.0004),
            True,
            id="expiry-within-1ms",
        ),
        pytest.param(
            _config(expires_at=EXPIRES + 0.0004),
            _config(expires_at=EXPIRES),
            True,
            id="expiry-within-1ms-reversed",
        ),
        pytest.param(
            _config(expires_at=EXPIRES),
            _config(expires_at=EXPIRES + 0.002),
            False,
            id="expiry-2ms-apart",
        ),
        pytest.param(
            _config(expires_at=EXPIRES), _config(expires_at=EXPIRES + 1), False, id="expiry-1s"
        ),
        pytest.param(_config(expires_at=EXPIRES), _config(), False, id="expiry-vs-none"),
        pytest.param(_config(), _config(expires_at=EXPIRES), False, id="none-vs-expiry"),
        pytest.param(_config(expires_at=0.0), _config(), False, id="expiry-zero-vs-none"),
        pytest.param(_config(ttl_seconds=60), _config(expires_at=60.0), False, id="ttl-vs-expiry"),
        # closure status
        pytest.param(_config(closed=True), _config(closed=True), True, id="both-closed"),
        pytest.param(_config(closed=True), _config(closed=False), False, id="closed-vs-open"),
        pytest.param(_config(closed=False), _config(closed=True), False, id="open-vs-closed"),
        # forks
        pytest.param(
            _config(forked_from="/a", fork_position=10),
            _config(forked_from="/a", fork_position=10),
            True,
            id="fork-same",
        ),
        pytest.param(
            _config(forked_from="/a", fork_position=10),
            _config(forked_from="/b", fork_position=10),
            False,
            id="fork-source-differs",
        ),
        pytest.param(
            _config(forked_from="/a", fork_position=10),
            _config(forked_from="/a", fork_position=11),
            False,
            id="fork-position-differs",
        ),
        pytest.param(_config(forked_from="/a"), _config(), False, id="fork-vs-plain"),
        # several things at once
        pytest.param(
            StreamConfig("text/plain; charset=utf-8", 3600, None, True),
            StreamConfig("TEXT/PLAIN", 3600, None, True),
            True,
            id="all-fields-match",
        ),
        pytest.param(
            StreamConfig("text/plain", 3600, None, True),
            StreamConfig("text/plain", 3600, None, False),
            False,
            id="only-closure-differs",
        ),
    ],
)
def test_matches(existing: StreamConfig, requested: StreamConfig, matches: bool) -> None:
    assert existing.matches(requested) is matches
    assert requested.matches(existing) is matches  # the comparison is symmetric


def test_fork_fields_default_to_none() -> None:
    config = StreamConfig("text/plain", None, None, False)
    assert config.forked_from is None
    assert config.fork_position is None


def test_config_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        BASE.closed = True  # type: ignore[misc]
