"""The CloudFront distribution in template.yaml says what core/cdn/policy.py says (the local
nginx stand-in is generated from that policy, so the two cannot drift apart)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_template import load_template

from durable_streams_aws.core.auth import ORIGIN_SECRET_HEADER
from durable_streams_aws.core.cdn import DEFAULT_POLICY, METHOD_KEY_HEADER
from durable_streams_aws.core.config import WAIT_MARGIN_SECONDS, Settings

ROOT = Path(__file__).resolve().parent.parent.parent
ALL_VIEWER_EXCEPT_HOST_HEADER = "b689b0a8-53d0-40ab-baf2-68738e2966ac"


def resources() -> dict[str, Any]:
    return dict(load_template()["Resources"])


def cache_policy() -> dict[str, Any]:
    return dict(resources()["StreamCachePolicy"]["Properties"]["CachePolicyConfig"])


def distribution() -> dict[str, Any]:
    return dict(resources()["Distribution"]["Properties"]["DistributionConfig"])


def test_cache_key_holds_exactly_the_policys_parameters() -> None:
    key = cache_policy()["ParametersInCacheKeyAndForwardedToOrigin"]
    assert key["QueryStringsConfig"] == {
        "QueryStringBehavior": "whitelist",
        "QueryStrings": list(DEFAULT_POLICY.key_query_parameters),
    }
    assert key["HeadersConfig"] == {
        "HeaderBehavior": "whitelist",
        "Headers": list(DEFAULT_POLICY.key_headers),
    }
    assert METHOD_KEY_HEADER in DEFAULT_POLICY.key_headers
    assert key["CookiesConfig"] == {"CookieBehavior": "none"}
    assert key["EnableAcceptEncodingGzip"] is DEFAULT_POLICY.compress
    assert key["EnableAcceptEncodingBrotli"] is DEFAULT_POLICY.compress


def test_ttls_are_the_policys() -> None:
    config = cache_policy()
    assert (config["MinTTL"], config["DefaultTTL"], config["MaxTTL"]) == (
        DEFAULT_POLICY.min_ttl,
        DEFAULT_POLICY.default_ttl,
        DEFAULT_POLICY.max_ttl,
    )
    assert DEFAULT_POLICY.min_ttl == 0  # the origin's no-store must win
    assert Settings().cache_max_age + Settings().stale_while_revalidate <= 3600
    # A 204 stays fresh a second and may be served stale as long as a long-poll lasts: the
    # minimum TTL must not lengthen the first, and the maximum must hold both.
    longest_poll = load_template()["Parameters"]["LongPollTimeout"]["MaxValue"]
    slowest = Settings(long_poll_timeout=longest_poll).cache_rules
    assert DEFAULT_POLICY.min_ttl <= slowest.timeout_max_age
    assert slowest.timeout_max_age + slowest.timeout_stale_while_revalidate <= config["MaxTTL"]


def test_origin_shield_is_off_unless_a_region_is_given() -> None:
    template = load_template()
    parameter = template["Parameters"]["OriginShieldRegion"]
    assert parameter["Default"] == ""
    assert template["Conditions"]["OriginShieldOn"] == {
        "!Not": [{"!Equals": [{"!Ref": "OriginShieldRegion"}, ""]}]
    }
    assert distribution()["Origins"][0]["OriginShield"] == {
        "!If": [
            "OriginShieldOn",
            {"Enabled": True, "OriginShieldRegion": {"!Ref": "OriginShieldRegion"}},
            {"!Ref": "AWS::NoValue"},
        ]
    }


def test_every_error_cloudfront_would_cache_has_its_ttl_set() -> None:
    errors = {
        item["ErrorCode"]: item["ErrorCachingMinTTL"]
        for item in distribution()["CustomErrorResponses"]
    }
    assert errors == DEFAULT_POLICY.error_caching_ttls
    assert all("ResponsePagePath" not in item for item in distribution()["CustomErrorResponses"])


def test_origin_waits_beyond_the_function_and_the_long_poll() -> None:
    origin = distribution()["Origins"][0]["CustomOriginConfig"]
    function = resources()["ApiFunction"]["Properties"]
    assert function["Timeout"] == DEFAULT_POLICY.function_timeout
    assert origin["OriginReadTimeout"] == DEFAULT_POLICY.origin_read_timeout
    assert origin["OriginReadTimeout"] > function["Timeout"]
    assert origin["OriginKeepaliveTimeout"] == DEFAULT_POLICY.origin_keepalive_timeout
    longest_poll = load_template()["Parameters"]["LongPollTimeout"]["MaxValue"]
    assert longest_poll + WAIT_MARGIN_SECONDS <= function["Timeout"]
    assert origin["OriginProtocolPolicy"] == "https-only"


def test_behaviour_caches_reads_only_and_forwards_for_a_function_url() -> None:
    behaviour = distribution()["DefaultCacheBehavior"]
    assert behaviour["CachedMethods"] == ["GET", "HEAD"]
    assert set(behaviour["AllowedMethods"]) >= {"GET", "HEAD", "PUT", "POST", "DELETE", "OPTIONS"}
    assert behaviour["OriginRequestPolicyId"] == ALL_VIEWER_EXCEPT_HOST_HEADER
    assert behaviour["Compress"] is True
    assert behaviour["CachePolicyId"] == {"!Ref": "StreamCachePolicy"}
    (association,) = behaviour["FunctionAssociations"]
    assert association["EventType"] == "viewer-request"
    assert association["FunctionARN"] == {"!GetAtt": "ViewerRequestFunction.FunctionARN"}
    # Writers are never redirected (a redirected POST loses its body).
    assert behaviour["ViewerProtocolPolicy"] == "https-only"


def test_every_path_reaches_the_origin_by_the_one_behaviour() -> None:
    """The console (`/console/...`: its page `no-cache`, its fingerprinted assets cached a year,
    its API `no-store`) goes through CloudFront as the streams do: no behaviour of its own, and
    a viewer-request function that never looks at the path. Its assets are kept at the edge an
    hour at most (the maximum TTL); a new version has new names, so that is never stale."""
    config = distribution()
    assert "CacheBehaviors" not in config
    code = resources()["ViewerRequestFunction"]["Properties"]["FunctionCode"]
    assert "uri" not in code
    # The origin request policy forwards every query parameter, those outside the key too
    # (the overview's `refresh`).
    assert config["DefaultCacheBehavior"]["OriginRequestPolicyId"] == ALL_VIEWER_EXCEPT_HOST_HEADER


def test_the_deployed_function_is_the_tested_one() -> None:
    function = resources()["ViewerRequestFunction"]["Properties"]
    source = (ROOT / "infra" / "cloudfront" / "viewer_request.js").read_text()
    assert function["FunctionCode"] == source
    assert function["FunctionConfig"]["Runtime"] == "cloudfront-js-2.0"
    assert function["AutoPublish"] is True


def test_origin_is_the_function_url() -> None:
    origin = distribution()["Origins"][0]
    assert origin["DomainName"] == {
        "!Select": [2, {"!Split": ["/", {"!GetAtt": "ApiFunctionUrl.FunctionUrl"}]}]
    }


def test_outputs_name_the_distribution() -> None:
    outputs = load_template()["Outputs"]
    assert outputs["DistributionUrl"]["Value"] == {"!Sub": "https://${Distribution.DomainName}"}
    assert outputs["CdnStreamBaseUrl"]["Value"] == {
        "!Sub": "https://${Distribution.DomainName}/v1/stream/"
    }


def test_origin_requests_carry_the_secret_the_function_requires() -> None:
    origin = distribution()["Origins"][0]
    [header] = origin["OriginCustomHeaders"]
    assert header["HeaderName"] == ORIGIN_SECRET_HEADER
    function = resources()["ApiFunction"]["Properties"]["Environment"]["Variables"]
    # CloudFront sends the secret's "current" value; the function reads the same secret (and
    # accepts its "previous" value too, during a rotation).
    assert header["HeaderValue"] == {
        "!Sub": "{{resolve:secretsmanager:${OriginSecret}:SecretString:current}}"
    }
    assert function["DS_ORIGIN_SECRET_ID"] == {"!Ref": "OriginSecret"}
    assert "DS_ORIGIN_SECRET" not in function  # never in plain sight in the configuration
    assert function["DS_ORIGIN_LOCK"] == {"!Ref": "OriginLock"}
    generated = resources()["OriginSecret"]["Properties"]["GenerateSecretString"]
    assert generated["GenerateStringKey"] == "current"


def test_cloudfront_passes_the_origins_security_headers_on() -> None:
    """The origin's Content-Security-Policy and Content-Disposition (stored content cannot run
    script) reach viewers unchanged: no response headers policy overrides or removes them."""
    config = distribution()
    behaviors = [config["DefaultCacheBehavior"], *config.get("CacheBehaviors", [])]
    for behavior in behaviors:
        policy_id = behavior.get("ResponseHeadersPolicyId")
        if policy_id is None:
            continue
        name = policy_id.get("Ref") if isinstance(policy_id, dict) else None
        assert name is not None, f"a managed response headers policy may override: {policy_id}"
        headers = resources()[name]["Properties"]["ResponseHeadersPolicyConfig"]
        security = headers.get("SecurityHeadersConfig", {})
        csp = security.get("ContentSecurityPolicy")
        assert csp is None or csp["Override"] is False
        removed = headers.get("RemoveHeadersConfig", {}).get("Items", [])
        names = {item["Header"].lower() for item in removed}
        assert not names & {"content-security-policy", "content-disposition"}
