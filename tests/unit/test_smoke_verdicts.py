"""What `dsaws smoke` concludes from what it saw: cache statuses, refusals, the streams' root."""

from __future__ import annotations

import pytest

from durable_streams_aws.core.smoke import Outcome, stream_root
from durable_streams_aws.core.smoke._verdicts import (
    cache_status,
    collapsed,
    refused_anonymous_write,
    refused_direct_request,
    repeated_read,
)


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"x-cache": "Hit from cloudfront"}, "hit"),
        ({"x-cache": "RefreshHit from cloudfront"}, "refreshhit"),
        ({"x-cache": "Miss from cloudfront"}, "miss"),
        ({"x-cache-status": "HIT"}, "hit"),
        ({"x-cache-status": "EXPIRED"}, "expired"),
        ({"content-type": "text/plain"}, None),
        ({"x-cache-status": ""}, None),
    ],
)
def test_cache_status_reads_cloudfront_and_nginx(
    headers: dict[str, str], status: str | None
) -> None:
    assert cache_status(headers) == status


def test_a_repeated_read_must_be_a_hit() -> None:
    assert repeated_read("miss", "hit").outcome is Outcome.PASSED
    assert repeated_read("miss", "refreshhit").outcome is Outcome.PASSED
    went_on = repeated_read("miss", "miss")
    assert went_on.outcome is Outcome.FAILED and "went to the origin" in went_on.detail
    nothing = repeated_read(None, None)
    assert nothing.outcome is Outcome.FAILED and "no CDN" in nothing.detail


def test_long_polls_collapse_when_at_most_one_reaches_the_origin() -> None:
    assert collapsed(["miss", "hit", "hit", "updating"]).outcome is Outcome.PASSED
    assert collapsed(["hit", "hit"]).outcome is Outcome.PASSED
    spread = collapsed(["miss", "expired", "hit", "miss"])
    assert spread.outcome is Outcome.FAILED
    assert spread.detail.startswith("3 of 4 long-polls went to the origin")
    assert "does not collapse" in spread.detail
    assert collapsed(["miss", "expired"], origin_budget=2).outcome is Outcome.PASSED
    assert collapsed([]).outcome is Outcome.FAILED
    assert "no CDN" in collapsed(["hit", None]).detail


@pytest.mark.parametrize(
    ("status", "outcome"),
    [(401, Outcome.PASSED), (403, Outcome.PASSED), (204, Outcome.FAILED), (500, Outcome.FAILED)],
)
def test_an_anonymous_write_must_be_refused(status: int, outcome: Outcome) -> None:
    assert refused_anonymous_write(status).outcome is outcome
    assert "anyone may write" in refused_anonymous_write(200).detail


@pytest.mark.parametrize(
    ("status", "outcome"),
    [(403, Outcome.PASSED), (200, Outcome.FAILED), (401, Outcome.FAILED), (502, Outcome.FAILED)],
)
def test_the_origin_must_refuse_direct_requests(status: int, outcome: Outcome) -> None:
    assert refused_direct_request(status).outcome is outcome
    assert "not locked" in refused_direct_request(200).detail


@pytest.mark.parametrize(
    ("url", "root"),
    [
        ("https://d1.cloudfront.net", "https://d1.cloudfront.net/v1/stream"),
        ("https://d1.cloudfront.net/", "https://d1.cloudfront.net/v1/stream"),
        ("http://127.0.0.1:4437/v1/stream/", "http://127.0.0.1:4437/v1/stream"),
        ("http://host/custom/root", "http://host/custom/root"),
    ],
)
def test_a_bare_host_gets_the_servers_stream_root(url: str, root: str) -> None:
    assert stream_root(url) == root


def test_an_unreachable_deployment_fails_the_first_check_and_stops() -> None:
    from durable_streams_aws.core.smoke import SmokeOptions, format_report, run_smoke

    checks = run_smoke(SmokeOptions(url="http://127.0.0.1:9", timeout=2))  # nothing listens
    assert [(c.name, c.outcome) for c in checks] == [("create", Outcome.FAILED)]
    assert "ConnectError" in checks[0].detail
    assert format_report(checks).endswith("1 checks, 1 failed")


@pytest.mark.parametrize(
    "arguments",
    [
        ["--url", "not a url"],
        ["--url", "ftp://host/v1/stream"],
        ["--url", "http://127.0.0.1:9", "--origin", "lambda-url"],
        ["--url", "http://127.0.0.1:9", "--timeout", "-1"],
        ["--url", "http://127.0.0.1:9", "--timeout", "nan"],
    ],
)
def test_bad_arguments_are_refused_before_anything_is_sent(
    arguments: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from durable_streams_aws.core.cli import main

    with pytest.raises(SystemExit) as refused:
        main(["smoke", *arguments])
    assert refused.value.code == 2
    error = capsys.readouterr().err
    assert "URL" in error or "seconds" in error
