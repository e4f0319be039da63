"""Server settings. Every field can be set by an environment variable prefixed `DS_`
(for example `DS_LONG_POLL_TIMEOUT=15`); that is how the Lambda function is configured.

Settings that cannot work where the server runs are refused when it starts (`load_settings`),
not discovered by the first request that needs them.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .protocol.caching import CacheRules
from .protocol.retention import RetentionPolicy, parse_prefix_defaults

MIB = 1024 * 1024
# A Function URL carries at most 6 MB each way (6,291,556 bytes); this leaves room for the
# status, the headers and the JSON envelope around a response body.
LAMBDA_MAX_RESPONSE_BYTES = 6_000_000
# `dsaws serve` has no such front door: a read from a stream's start returns up to this much in
# one response (clients that make exactly one request get a whole stream, as from the
# reference server), unless DS_MAX_RESPONSE_BYTES says otherwise.
SERVE_MAX_RESPONSE_BYTES = 64 * MIB
# A request body reaches the function base64-encoded inside that same 6 MB.
LAMBDA_MAX_APPEND_BYTES = 4 * MIB
# A wait (long-poll, SSE window, contended write) must end this long before the function's
# timeout, to leave room for the reads and writes around it and for the response.
WAIT_MARGIN_SECONDS = 5.0


# What a header value (CloudFront's, nginx's) carries without quoting, too long to guess.
ORIGIN_SECRET_PATTERN = re.compile(r"[A-Za-z0-9._~+/=-]{16,}")


def running_in_lambda() -> bool:
    return bool(os.environ.get("AWS_LAMBDA_FUNCTION_NAME"))


@dataclass(frozen=True)
class SizeLimits:
    """How big a request body and a response may be (bytes)."""

    max_append_bytes: int
    max_read_bytes: int  # a read's data, except a catch-up read from a stream's start
    max_read_from_start_bytes: int | None  # that read's, unbounded (None or 0: max_response)
    max_response_bytes: int  # a response body once encoded for the front door
    max_bounded_read_bytes: int  # a bounded catch-up read's (`until`), from anywhere


@dataclass(frozen=True)
class LiveReads:
    """How the live reads (long-poll, SSE) wait."""

    poll_interval: float  # seconds between tail checks
    long_poll_timeout: float
    sse_window: bool  # answer SSE in bounded windows (buffered hosts) rather than streaming
    sse_seconds: float  # how long an SSE response lasts: its window, or its lifetime


@dataclass(frozen=True)
class StreamSettings:
    """What the stream endpoints need of the settings."""

    base_path: str
    limits: SizeLimits
    live: LiveReads
    cache_rules: CacheRules
    # Policies of streams created without Stream-Retention, by path prefix (longest first).
    retention_defaults: tuple[tuple[str, RetentionPolicy], ...] = ()


@dataclass(frozen=True)
class OriginLockSettings:
    """Which requests must come through the CDN, and where the accepted secrets are."""

    lock: Literal["off", "reads", "all"]
    inline_secrets: str | None
    secret_id: str | None
    max_age: float  # seconds the secret fetched from `secret_id` is cached


@dataclass(frozen=True)
class KeySettings:
    """Where the HMAC key set that signs tokens and read URLs is kept (at most one place)."""

    inline: str | None
    secret_id: str | None
    parameter: str | None
    max_age: float  # seconds a fetched key set is cached

    @property
    def configured(self) -> bool:
        return bool(self.inline or self.secret_id or self.parameter)


@dataclass(frozen=True)
class AuthSettings:
    """What access control checks requests against."""

    public_prefixes: tuple[str, ...]  # relative to the stream root; "" is every stream
    audience: str
    issuer: str | None
    claim: str  # the claim that holds the grants
    jwks_url: str | None
    max_lifetime: int  # seconds ahead an expiry may be, at most
    keys: KeySettings


@dataclass(frozen=True)
class SubscriptionSettings:
    """How subscriptions queue their work and sign their wakes."""

    region: str | None
    queue_url: str | None  # None: an in-process timer thread
    sweep_seconds: float
    webhook_secret: str | None
    webhook_secret_id: str | None
    webhook_localhost_allowed: bool


@dataclass(frozen=True)
class CorsSettings:
    origins: tuple[str, ...]  # ("*",): any origin

    @property
    def any_origin(self) -> bool:
        return self.origins == ("*",)


ENV_PREFIX = "DS_"
_CONSOLE_PATH = re.compile(r"(/[A-Za-z0-9_-]+)+")


class Settings(BaseModel):
    """Keyword arguments win over `DS_` variables, which win over the defaults. Reading the
    variables is the whole of what pydantic-settings did here (pydantic converts and checks
    the text), and importing it cost every cold start some 40 ms."""

    model_config = ConfigDict(extra="ignore", validate_default=True)

    def __init__(self, **values: Any) -> None:
        super().__init__(**{**_from_environment(), **values})

    table: str = "durable-streams"
    bucket: str = "durable-streams-data"
    region: str | None = None
    base_path: str = "/v1/stream"

    long_poll_timeout: float = Field(15.0, ge=0, description="seconds a long-poll may wait")
    poll_interval: float = Field(0.2, gt=0, description="seconds between tail checks")
    max_read_bytes: int = Field(1 * MIB, gt=0, description="largest read response body")
    max_read_from_start_bytes: int | None = Field(
        None,
        ge=0,
        description="largest response to an unbounded catch-up read from a stream's start "
        "(a bounded one takes max_bounded_read_bytes; unset or 0: "
        "what the front door carries, max_response_bytes, so one request reads a whole "
        "stream up to that size)",
    )
    max_response_bytes: int = Field(
        LAMBDA_MAX_RESPONSE_BYTES,
        ge=16 * 1024,
        description="largest response body once encoded for the front door (base64, escapes)",
    )
    max_bounded_read_bytes: int = Field(
        8 * MIB,
        gt=0,
        description="largest response to a bounded catch-up read (`until`: a bulk reader's, "
        "such as the Spark source's), from any offset; never less than max_read_bytes, never "
        "more than three quarters of max_response_bytes (room for base64 and escapes)",
    )
    max_append_bytes: int = Field(4 * MIB, gt=0, description="largest accepted request body")
    inline_max_bytes: int = Field(64 * 1024, gt=0, le=200 * 1024)
    chunk_cache_bytes: int = Field(
        32 * MIB,
        ge=0,
        description="memory for the chunks an instance committed or read (0: none), so a read "
        "of recent history skips the Query",
    )
    ttl_renew_fraction: float = Field(0.1, gt=0, le=1)
    write_deadline: float = Field(10.0, gt=0, description="seconds to win a contended write")
    function_timeout: float | None = Field(
        None, gt=0, description="the Lambda function's timeout in seconds (set by the template)"
    )

    sse_mode: Literal["stream", "window"] = Field(
        default_factory=lambda: "window" if running_in_lambda() else "stream",
        description="stream under uvicorn; window for buffered hosts (chosen inside Lambda)",
    )
    sse_lifetime: float = Field(60.0, gt=0, description="seconds before an SSE stream ends")
    sse_window: float | None = Field(
        None, gt=0, description="bounded-window wait in seconds (default: long_poll_timeout)"
    )

    cache_visibility: Literal["public", "private"] = "public"
    cache_max_age: int = Field(60, ge=0, description="seconds a cacheable read may be cached")
    stale_while_revalidate: int = Field(300, ge=0)
    cache_timeout_max_age: int = Field(
        1, ge=0, le=5, description="seconds a long-poll 204 may be cached (collapsing)"
    )
    cache_timeout_stale_while_revalidate: int | None = Field(
        None,
        ge=0,
        description="seconds a cache may serve an expired long-poll 204 while it asks the "
        "origin again (default: the long-poll timeout, rounded up)",
    )
    retry_after_seconds: int = 1
    listing: bool = Field(
        False, description="answer GET {base_path}?prefix= with the streams under a prefix"
    )
    console: bool = Field(
        False,
        description="serve the browser console at console_path (on by default in `dsaws serve`)",
    )
    console_path: str = Field(
        "/console", description="where the console is served (a path of its own, outside the root)"
    )
    console_metrics_namespace: str | None = Field(
        None,
        description="the CloudWatch namespace the console's overview reads the rates of every "
        "instance from (set by the template); unset: the answering process's own counts",
    )

    # The sealing sizes default to the sealer's own (`core.storage.SealPolicy`, 8 MiB and
    # 256 KiB); `core.runtime.seal_policy` combines them. Settings leave the storage package
    # unimported: every `dsaws` command reads them.
    segment_bytes: int | None = Field(
        None, ge=64, description="size sealed S3 segments grow to (default 8 MiB)"
    )
    seal_page_bytes: int | None = Field(
        None,
        ge=64,
        description="a segment's read unit, which a read response takes whole (default: "
        "max_read_bytes less 64, so a catch-up read costs one ranged GET per response)",
    )
    seal_hot_bytes: int | None = Field(
        None,
        ge=0,
        description="newest bytes of an open stream left unsealed; commits mark a stream "
        "for the sealer each time this many more have arrived (default 256 KiB)",
    )
    seal_interval: float = Field(
        5.0, ge=0, description="seconds between sealer runs inside `dsaws serve` (0: never)"
    )
    collect_interval: float = Field(
        60.0,
        ge=0,
        description="seconds between collector runs inside `dsaws serve` (0: never); a "
        "deployment runs its collector function on a schedule instead",
    )
    journal_compact_min_bytes: int = Field(
        64 * MIB,
        ge=0,
        description="the embedded emulator compacts its journal once it is this long and at "
        "least twice what the emulator holds (`dsaws serve` on a data directory)",
    )
    pause_trace: str | None = Field(
        None,
        description="a file `dsaws serve` writes as it stops: every request, garbage "
        "collection, turn at the embedded emulator's lock and background sweep, with their "
        "times (JSON lines; see core/pause_trace.py), for finding what makes requests wait",
    )
    retention_defaults: str = Field(
        "",
        description="retention policies of streams created without Stream-Retention, by path "
        "prefix: `prefix=policy` entries separated by `,` (`logs/=max-age=604800, "
        "state/=compact`); the longest matching prefix wins",
    )
    retention_interval: float = Field(
        30.0,
        ge=0,
        description="seconds between retention and compaction runs inside `dsaws serve` (0: "
        "never); a deployment runs them on a schedule of its sealer function",
    )
    retention_delay: float | None = Field(
        None,
        ge=0,
        description="seconds a retention cut is announced before it takes effect, during which "
        "reads of what it drops are cached no longer than until then (default: "
        "cache_max_age + stale_while_revalidate + 5, over the longest a cache may keep a read)",
    )
    compaction_min_bytes: int = Field(
        1 * MIB,
        ge=1,
        description="sealed history a compacted stream must have gained since its snapshot "
        "before it is compacted again",
    )
    collect_grace_seconds: float = Field(
        3600.0,
        ge=0,
        description="seconds before the collector inside `dsaws serve` removes a deleted "
        "stream's data or an upload no commit names (the deployment's collector waits as "
        "long: far longer than any request may still be writing)",
    )

    # Access control (docs/security.md). Off: anyone who reaches the server may do anything,
    # which is what `dsaws serve` on loopback is for.
    auth: bool = Field(False, description="require a token or a signed read URL")
    auth_secret: str | None = Field(
        None, description="the HMAC key set itself (local use and tests; deployments use _ID)"
    )
    auth_secret_id: str | None = Field(None, description="Secrets Manager secret of the keys")
    auth_secret_parameter: str | None = Field(
        None, description="SSM SecureString parameter of the HMAC key set"
    )
    auth_jwks_url: str | None = Field(None, description="identity provider's JWKS (RS256/ES256)")
    auth_audience: str = Field("durable-streams", min_length=1, description="required `aud`")
    auth_issuer: str | None = Field(None, description="required `iss` (needed with a JWKS)")
    auth_claim: str = Field("scope", min_length=1, description="the claim that holds grants")
    auth_keys_max_age: int = Field(
        300, ge=1, description="seconds the HMAC keys and the origin secret are cached"
    )
    auth_max_lifetime: int = Field(
        7 * 24 * 3600,  # core.auth.decision.DEFAULT_MAX_LIFETIME_SECONDS
        ge=60,
        description="seconds ahead a token's or signed URL's expiry may be, at most",
    )
    public_read_prefixes: str = Field(
        "", description="comma-separated path prefixes anyone may read (`*`: every stream)"
    )
    origin_secret: str | None = Field(
        None, description="comma-separated: the CDN's origin header values accepted"
    )
    origin_secret_id: str | None = Field(
        None, description='Secrets Manager secret of {"current": ..., "previous": ...} values'
    )
    origin_lock: Literal["off", "reads", "all"] = Field(
        "off", description="requests that must carry the origin secret (come through the CDN)"
    )
    cors_origins: str = Field("*", description="comma-separated origins browsers may call from")
    loopback_only: bool = Field(
        False,
        description="answer only requests for a loopback name, and no page of another site "
        "(`dsaws serve` on loopback without access control turns it on)",
    )

    # Subscriptions (docs/subscriptions.md): the `__ds` control API and wake delivery.
    subscriptions: bool = Field(True, description="serve the subscription control API")
    subscription_queue_url: str | None = Field(
        None, description="SQS queue of delivery tasks (unset: an in-process timer thread)"
    )
    webhook_secret: str | None = Field(
        None, description="text the webhook signing and wake-token keys derive from"
    )
    webhook_secret_id: str | None = Field(
        None, description="Secrets Manager secret holding that text"
    )
    subscription_sweep_seconds: float = Field(
        5.0, ge=0, description="seconds between in-process sweeps (no queue; 0: never)"
    )
    webhook_allow_localhost: bool | None = Field(
        None,
        description="accept http://localhost and http://127.0.0.x webhooks (development); "
        "unset: only outside Lambda with access control off (`dsaws serve`: and on loopback)",
    )

    @field_validator(
        "auth_secret",
        "auth_secret_id",
        "auth_secret_parameter",
        "auth_jwks_url",
        "auth_issuer",
        "origin_secret",
        "origin_secret_id",
        "subscription_queue_url",
        "webhook_secret",
        "webhook_secret_id",
        "console_metrics_namespace",
        mode="before",
    )
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        # A template passes an unused parameter as an empty string.
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("retention_defaults")
    @classmethod
    def _retention_defaults_parse(cls, value: str) -> str:
        parse_prefix_defaults(value)  # a ValueError names the entry
        return value

    @property
    def retention_delay_seconds(self) -> float:
        if self.retention_delay is not None:
            return self.retention_delay
        # A few seconds over the longest a cache may keep a read: caches count whole
        # seconds, and a CDN's clock is not the origin's.
        return float(self.cache_max_age + self.stale_while_revalidate + 5)

    @model_validator(mode="after")
    def _fits_the_host(self) -> Settings:
        problems = [
            *self._lambda_problems(),
            *self._timeout_problems(),
            *self._auth_problems(),
            *self._console_problems(),
        ]
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _console_problems(self) -> list[str]:
        if not self.console:
            return []
        path = self.console_path
        if not _CONSOLE_PATH.fullmatch(path):
            return [
                f"DS_CONSOLE_PATH={path!r}: a path such as /console (letters, digits, -, _ and "
                "/ between segments; no trailing /)"
            ]
        if self.console_overlaps_streams:
            return [
                f"DS_CONSOLE_PATH={path} overlaps the stream root "
                f"{self.base_path.rstrip('/') or '/'} or /healthz: choose another path, or "
                "DS_CONSOLE=false"
            ]
        return []

    @property
    def console_overlaps_streams(self) -> bool:
        """Whether the console's path would hide streams (or the stream root, the console)."""
        path, base = self.console_path, self.base_path.rstrip("/")
        return (
            not base
            or path in {"/healthz", base}
            or path.startswith(base + "/")
            or base.startswith(path + "/")
        )

    def _lambda_problems(self) -> list[str]:
        if not running_in_lambda():
            return []
        problems = []
        if self.sse_mode == "stream":
            problems.append(
                "DS_SSE_MODE=stream cannot work inside Lambda, whose responses are buffered: "
                "use window"
            )
        if self.max_response_bytes > LAMBDA_MAX_RESPONSE_BYTES:
            problems.append(
                f"DS_MAX_RESPONSE_BYTES={self.max_response_bytes} is more than a Lambda "
                f"response carries ({LAMBDA_MAX_RESPONSE_BYTES})"
            )
        if self.max_append_bytes > LAMBDA_MAX_APPEND_BYTES:
            problems.append(
                f"DS_MAX_APPEND_BYTES={self.max_append_bytes} is more than a Lambda request "
                f"carries once base64-encoded ({LAMBDA_MAX_APPEND_BYTES})"
            )
        return problems

    def _timeout_problems(self) -> list[str]:
        if self.function_timeout is None:
            return []
        waits = {
            "DS_LONG_POLL_TIMEOUT": self.long_poll_timeout,
            "DS_WRITE_DEADLINE": self.write_deadline,
        }
        if self.sse_mode == "window":
            waits["DS_SSE_WINDOW"] = self.sse_window_seconds
        else:
            waits["DS_SSE_LIFETIME"] = self.sse_lifetime
        limit = self.function_timeout - WAIT_MARGIN_SECONDS
        return [
            f"{name}={seconds:g} s must end {WAIT_MARGIN_SECONDS:g} s before the function's "
            f"{self.function_timeout:g} s timeout (at most {limit:g} s)"
            for name, seconds in waits.items()
            if seconds > limit
        ]

    def _auth_problems(self) -> list[str]:
        problems = []
        stored = [
            v for v in (self.auth_secret, self.auth_secret_id, self.auth_secret_parameter) if v
        ]
        if len(stored) > 1:
            problems.append(
                "name one place for the HMAC keys: DS_AUTH_SECRET, DS_AUTH_SECRET_ID or "
                "DS_AUTH_SECRET_PARAMETER"
            )
        if self.auth and not stored and not self.auth_jwks_url:
            problems.append(
                "DS_AUTH=true needs keys: DS_AUTH_SECRET_ID (Secrets Manager), "
                "DS_AUTH_SECRET_PARAMETER (SSM), DS_AUTH_SECRET (the key itself) or "
                "DS_AUTH_JWKS_URL"
            )
        if self.auth_jwks_url and not self.auth_issuer:
            problems.append("DS_AUTH_JWKS_URL needs DS_AUTH_ISSUER: the provider signs for others")
        if self.origin_lock != "off" and not (self.origin_secrets or self.origin_secret_id):
            problems.append(
                f"DS_ORIGIN_LOCK={self.origin_lock} needs DS_ORIGIN_SECRET or DS_ORIGIN_SECRET_ID"
            )
        if self.origin_secret and self.origin_secret_id:
            problems.append("name one of DS_ORIGIN_SECRET and DS_ORIGIN_SECRET_ID")
        if any(not ORIGIN_SECRET_PATTERN.fullmatch(secret) for secret in self.origin_secrets):
            problems.append(
                "DS_ORIGIN_SECRET: each value must be 16 or more letters, digits, or -._~+/="
            )
        if "*" in self.cors_origin_list and len(self.cors_origin_list) > 1:
            problems.append("DS_CORS_ORIGINS is either * or a list of origins, not both")
        return problems

    @property
    def webhook_localhost_allowed(self) -> bool:
        """Whether subscribers may name a loopback webhook: explicitly, or by default only
        where nobody but the machine's own users can subscribe (no access control, not in
        Lambda; `dsaws serve` also requires that it listens on loopback)."""
        if self.webhook_allow_localhost is not None:
            return self.webhook_allow_localhost
        return not running_in_lambda() and not self.auth

    @property
    def public_prefixes(self) -> tuple[str, ...]:
        """The public prefixes, relative to the stream root; "" stands for every stream."""
        prefixes = []
        for item in _comma_list(self.public_read_prefixes):
            # Only `*` makes every stream public; `/` (an empty prefix) makes nothing public.
            if item == "*" or item.lstrip("/"):
                prefixes.append("" if item == "*" else item.lstrip("/"))
        return tuple(prefixes)

    @property
    def origin_secrets(self) -> tuple[str, ...]:
        return _comma_list(self.origin_secret or "")

    @property
    def cors_origin_list(self) -> tuple[str, ...]:
        return _comma_list(self.cors_origins)

    @property
    def cache_rules(self) -> CacheRules:
        return CacheRules(
            self.cache_visibility,
            self.cache_max_age,
            self.stale_while_revalidate,
            self.cache_timeout_max_age,
            self.cache_timeout_stale_seconds,
        )

    @property
    def stream_settings(self) -> StreamSettings:
        limits = SizeLimits(
            self.max_append_bytes,
            self.max_read_bytes,
            self.max_read_from_start_bytes,
            self.max_response_bytes,
            self.max_bounded_read_bytes,
        )
        window = self.sse_mode == "window"
        live = LiveReads(
            self.poll_interval,
            self.long_poll_timeout,
            window,
            self.sse_window_seconds if window else self.sse_lifetime,
        )
        return StreamSettings(
            self.base_path,
            limits,
            live,
            self.cache_rules,
            parse_prefix_defaults(self.retention_defaults),
        )

    @property
    def origin_lock_settings(self) -> OriginLockSettings:
        return OriginLockSettings(
            self.origin_lock, self.origin_secret, self.origin_secret_id, self.auth_keys_max_age
        )

    @property
    def cors(self) -> CorsSettings:
        return CorsSettings(self.cors_origin_list)

    @property
    def key_settings(self) -> KeySettings:
        return KeySettings(
            self.auth_secret,
            self.auth_secret_id,
            self.auth_secret_parameter,
            self.auth_keys_max_age,
        )

    @property
    def auth_settings(self) -> AuthSettings:
        return AuthSettings(
            self.public_prefixes,
            self.auth_audience,
            self.auth_issuer,
            self.auth_claim,
            self.auth_jwks_url,
            self.auth_max_lifetime,
            self.key_settings,
        )

    @property
    def subscription_settings(self) -> SubscriptionSettings:
        return SubscriptionSettings(
            self.region,
            self.subscription_queue_url,
            self.subscription_sweep_seconds,
            self.webhook_secret,
            self.webhook_secret_id,
            self.webhook_localhost_allowed,
        )

    @property
    def cache_timeout_stale_seconds(self) -> int:
        """How long an expired long-poll 204 may be served while a cache asks again: as long as
        that request, itself a long-poll, may wait."""
        if self.cache_timeout_stale_while_revalidate is not None:
            return self.cache_timeout_stale_while_revalidate
        return math.ceil(self.long_poll_timeout)

    @property
    def sse_window_seconds(self) -> float:
        """How long a bounded-window SSE response waits for data."""
        return self.sse_window if self.sse_window is not None else self.long_poll_timeout


def _from_environment() -> dict[str, str]:
    """The `DS_` variables that name a setting, keyed by the setting's name (the case of a
    variable's name does not matter, as it did not to pydantic-settings)."""
    found = {}
    for name, value in os.environ.items():
        if name[: len(ENV_PREFIX)].upper() == ENV_PREFIX:
            field = name[len(ENV_PREFIX) :].lower()
            if field in Settings.model_fields:
                found[field] = value
    return found


def _comma_list(text: str) -> tuple[str, ...]:
    return tuple(item for item in (part.strip() for part in text.split(",")) if item)


class SettingsError(Exception):
    """Settings that are invalid or cannot work here, in one line per problem."""


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment (and `overrides`), refused with a readable message when
    they cannot work."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error["loc"])
            message = str(error["msg"]).removeprefix("Value error, ")
            lines.append(f"DS_{where.upper()}: {message}" if where else message)
        raise SettingsError("invalid settings: " + "; ".join(lines)) from None
