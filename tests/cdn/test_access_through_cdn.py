"""`dsaws serve --auth` behind the local CDN, configured as the deployment: tokens minted by
`dsaws token`, signed URLs by `dsaws sign-url`, the client and the command line carrying them,
and the origin locked to requests through nginx (which adds the origin secret, as CloudFront
does). Signed and public reads are shared in the CDN's cache; token reads never are."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from auth_support import LOCKED_ORIGIN_ENV
from support import ROOT, ServerProcess

from durable_streams_aws.client import AccessDenied, DurableStream
from durable_streams_aws.infra.local_cdn import install_nginx

pytestmark = pytest.mark.integration

AUTH_ENV = LOCKED_ORIGIN_ENV


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durable_streams_aws.core.cli", *args],
        cwd=ROOT,
        env={**os.environ, **AUTH_ENV, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    install_nginx()
    with ServerProcess("--auth", env=AUTH_ENV, with_cdn=True) as running:
        yield running


def test_tokens_signed_urls_and_the_locked_origin_end_to_end(server: ServerProcess) -> None:
    assert server.cdn_url is not None
    base = f"{server.cdn_url}/v1/stream"
    minted = cli("token", "read,append,create,delete,fork:*", "--lifetime", "600")
    assert minted.returncode == 0, minted.stderr
    admin = minted.stdout.strip()
    reader = cli("token", "read:private/").stdout.strip()
    refused = cli("token", "write:private/")
    assert refused.returncode == 2 and "not a grant" in refused.stderr

    asked = []

    def provider() -> str:
        asked.append(1)
        return admin

    with DurableStream(f"{base}/private/doc", token=provider) as stream:
        stream.create("text/plain")
        stream.append("hello")
        stream.close()
    assert len(asked) >= 3  # asked on every request
    with DurableStream(f"{base}/public/news", token=admin) as news:
        news.create("text/plain", closed=True, body=b"extra!")
    with DurableStream(f"{base}/private/doc") as anonymous, pytest.raises(AccessDenied) as denied:
        anonymous.head()
    assert denied.value.status == 401

    with httpx.Client(timeout=30) as http:
        # Around the CDN, straight to the function: refused, token or not.
        direct = http.get(
            f"{server.base_url}/v1/stream/public/news",
            params={"offset": "-1"},
            headers={"Authorization": f"Bearer {admin}"},
        )
        assert direct.status_code == 403

        def twice(url: str, **options: object) -> list[tuple[int, str, bytes]]:
            answers = [http.get(url, **options) for _ in range(2)]  # type: ignore[arg-type]
            return [
                (a.status_code, a.headers.get("x-cache-status", ""), a.content) for a in answers
            ]

        public = twice(f"{base}/public/news?offset=-1")
        assert public == [(200, "MISS", b"extra!"), (200, "HIT", b"extra!")]

        signed = cli("sign-url", "private/doc", "--url", base, "--lifetime", "600")
        assert signed.returncode == 0, signed.stderr
        signed_url = signed.stdout.strip() + "&offset=-1"
        assert twice(signed_url) == [(200, "MISS", b"hello"), (200, "HIT", b"hello")]
        stretched = signed_url.replace("expires=", "expires=9")
        assert http.get(stretched).status_code == 403
        elsewhere = signed_url.replace("/private/doc?", "/private/other?")
        assert http.get(elsewhere).status_code == 403

        headers = {"Authorization": f"Bearer {reader}"}
        token_reads = twice(f"{base}/private/doc?offset=-1", headers=headers)
        assert [status for status, _, _ in token_reads] == [200, 200]
        assert [cache for _, cache, _ in token_reads] == ["MISS", "MISS"]  # private: not kept
        assert http.get(f"{base}/private/doc?offset=-1").status_code == 401

    read = cli("read", "private/doc", "--url", base, "--token", reader)
    assert read.returncode == 0 and read.stdout == "hello", read.stderr
    denied_read = cli("read", "private/doc", "--url", base)
    assert denied_read.returncode == 8, denied_read.stderr
    no_delete = cli("delete", "private/doc", "--url", base, env={"DSAWS_TOKEN": reader})
    assert no_delete.returncode == 8 and "does not allow delete" in no_delete.stderr


def test_nobody_claims_a_wake_anonymously_through_the_cdn_of_a_public_deployment() -> None:
    """`PublicReadPrefixes=*` (a documented template value), through the CDN with no
    credentials: the attack claimed a wake (200 and a wake token), acked the stream's tail
    with it and so moved the subscription's cursor past bytes its worker never got. Claims
    are refused now; the worker with `consume` claims, and sees the pending bytes."""
    install_nginx()
    env = {**AUTH_ENV, "DS_PUBLIC_READ_PREFIXES": "*"}
    with ServerProcess("--auth", env=env, with_cdn=True) as server:
        base = f"{server.cdn_url}/v1/stream"
        subs = f"{base}/__ds/subscriptions"
        owner = {"Authorization": "Bearer " + cli("token", "read,create,append:*").stdout.strip()}
        with httpx.Client(timeout=30) as http:
            for path, kind in (("jobs/a", "text/plain"), ("wakes", "application/json")):
                made = http.put(f"{base}/{path}", headers={**owner, "Content-Type": kind})
                assert made.status_code == 201
            pull = {"type": "pull-wake", "streams": ["jobs/a"], "wake_stream": "wakes"}
            assert http.put(f"{subs}/workers", json=pull, headers=owner).status_code == 201
            appended = http.post(
                f"{base}/jobs/a", content=b"job", headers={**owner, "Content-Type": "text/plain"}
            )
            assert appended.status_code == 204
            claim = {"worker": "attacker"}
            anonymous = http.post(f"{subs}/workers/claim", json=claim)
            assert anonymous.status_code == 401, anonymous.text
            reader = {"Authorization": "Bearer " + cli("token", "read:*").stdout.strip()}
            assert http.post(f"{subs}/workers/claim", json=claim, headers=reader).status_code == 403
            consumer = cli("token", "read,consume:*").stdout.strip()
            claimed = http.post(
                f"{subs}/workers/claim",
                json={"worker": "w1"},
                headers={"Authorization": f"Bearer {consumer}"},
            )
            assert claimed.status_code == 200, claimed.text
            assert claimed.json()["streams"][0]["has_pending"] is True
