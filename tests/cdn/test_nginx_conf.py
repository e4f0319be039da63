"""The nginx stand-in's configuration, generated from the CDN policy, and accepted by nginx."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from durable_streams_aws.core.cdn import DEFAULT_POLICY, CdnPolicy
from durable_streams_aws.infra.local_cdn import NginxSite, install_nginx, render_nginx_conf


def render(tmp_path: Path, policy: CdnPolicy = DEFAULT_POLICY) -> str:
    site = NginxSite("127.0.0.1", 8081, "127.0.0.1", 8080, tmp_path, None)
    return render_nginx_conf(policy, site)


def directive(conf: str, name: str) -> list[str]:
    return re.findall(rf"^\s*{name} ([^;]*);", conf, flags=re.MULTILINE)


def test_key_names_every_key_parameter_header_and_the_method(tmp_path: Path) -> None:
    conf = render(tmp_path)
    (key,) = directive(conf, "proxy_cache_key")
    parts = key.strip('"').split("|")
    assert parts[:2] == ["$request_method", "$ds_path"]
    parameters = [f"$ds_key_{name}" for name in DEFAULT_POLICY.key_query_parameters]
    assert parts[2:] == [*parameters, "$http_authorization", "$http_origin"]
    for name in DEFAULT_POLICY.key_query_parameters:
        assert f"map $args $ds_key_{name} {{" in conf
    assert {"signature", "expires", "scope", "kid"} <= set(DEFAULT_POLICY.key_query_parameters)


def test_the_origin_secret_is_added_only_when_configured(tmp_path: Path) -> None:
    assert "x-ds-origin-secret" not in render(tmp_path)
    site = NginxSite("127.0.0.1", 8081, "127.0.0.1", 8080, tmp_path, None, "s3cret-value-0123")
    conf = render_nginx_conf(DEFAULT_POLICY, site)
    assert 'proxy_set_header x-ds-origin-secret "s3cret-value-0123"' in conf


def test_a_new_key_parameter_reaches_the_key(tmp_path: Path) -> None:
    policy = CdnPolicy(key_query_parameters=("cursor", "expires", "live", "offset", "signature"))
    (key,) = directive(render(tmp_path, policy), "proxy_cache_key")
    assert "$ds_key_signature" in key and "$ds_key_expires" in key


def test_collapsing_waits_as_long_as_the_origin_may_take(tmp_path: Path) -> None:
    conf = render(tmp_path)
    wait = f"{DEFAULT_POLICY.collapse_wait}s"
    assert directive(conf, "proxy_cache_lock") == ["on"]
    assert directive(conf, "proxy_cache_lock_timeout") == [wait]
    assert directive(conf, "proxy_cache_lock_age") == [wait]
    assert directive(conf, "proxy_read_timeout") == [f"{DEFAULT_POLICY.origin_read_timeout}s"]
    assert directive(conf, "keepalive_timeout") == [f"{DEFAULT_POLICY.origin_keepalive_timeout}s"]


def test_nothing_is_cached_on_nginx_own_account(tmp_path: Path) -> None:
    conf = render(tmp_path)
    assert directive(conf, "proxy_cache_valid") == []  # only the origin's Cache-Control counts
    assert directive(conf, "proxy_ignore_headers") == ["Vary"]


def test_stale_entries_are_served_only_as_the_origin_allows(tmp_path: Path) -> None:
    """nginx's lock covers new entries only; an expired one is collapsed by serving it stale
    while one request refreshes it, which the origin's stale-while-revalidate must allow (it
    caps it at the stream's expiry), never nginx on its own account."""
    conf = render(tmp_path)
    assert directive(conf, "proxy_cache_use_stale") == []
    assert directive(conf, "proxy_cache_background_update") == ["on"]
    assert directive(conf, "log_subrequest") == ["on"]  # the refreshes are in the access log


def test_loopback_and_private_files_only(tmp_path: Path) -> None:
    conf = render(tmp_path)
    assert directive(conf, "listen") == ["127.0.0.1:8081"]
    files = ["pid", "error_log", "access_log", "proxy_cache_path"]
    files += [f"{kind}_temp_path" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")]
    for name in files:
        (value,) = directive(conf, name)
        assert value.startswith(f"{tmp_path}/"), name


def test_compression_follows_the_policy(tmp_path: Path) -> None:
    assert directive(render(tmp_path), "gzip") == ["on"]
    assert directive(render(tmp_path, CdnPolicy(compress=False)), "gzip") == ["off"]


def test_nginx_accepts_the_configuration(tmp_path: Path) -> None:
    nginx = install_nginx()
    conf = tmp_path / "nginx.conf"
    conf.write_text(render(tmp_path))
    done = subprocess.run(
        [nginx, "-t", "-p", str(tmp_path), "-c", str(conf), "-e", str(tmp_path / "error.log")],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.fail(done.stderr)
