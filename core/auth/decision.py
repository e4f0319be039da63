"""Who may do what: one pure decision per request, from what the request needs and what it
presents. No I/O here: the caller verifies a token or a signed URL first and passes the result.

- A request needs actions on paths (`needs_for`): reads `read`, appends and closes `append`,
  creates `create`, deletes `delete`; a fork needs `fork` on the new stream and `read` on its
  source. A listing needs `read` on every stream; subscriptions, what `SUBSCRIPTION_*_NEEDS`
  say.
- Reads under a public prefix need nothing, whatever else the request carries.
- Otherwise a bearer token must grant every need (401 without one or with a bad one, 403 when it
  grants too little), or, for reads only, a signed read URL must cover the path (403 when it
  does not, or has expired, or its signature is wrong: the URL itself is the credential, as
  with S3's and CloudFront's signed URLs). Needs met publicly (a fork's public source) need
  nothing more.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from .grants import Action, Grant, within

REALM = "durable-streams"
# One reason for an unknown key id and a signature that does not verify, for tokens and signed
# URLs alike: a refusal must not tell which key ids exist.
BAD_SIGNATURE = "signature does not match"
# A token or signed URL good for longer than this is refused (the settings may allow more): a
# credential that never expires can be revoked only by removing its key. Seven days, the
# longest an S3 presigned URL may live.
DEFAULT_MAX_LIFETIME_SECONDS = 7 * 24 * 3600


@dataclass(frozen=True)
class Need:
    action: Action
    path: str
    listing: bool = False  # the listing extension: `path` is "", every stream

    def allowed_by(self, grant: Grant) -> bool:
        return grant.allows(self.action, self.path)

    def public_under(self, prefixes: Sequence[str]) -> bool:
        return self.action is Action.READ and any(within(self.path, p) for p in prefixes)

    def describe(self) -> str:
        if self.listing:
            return "read on every stream (a listing)"
        if not self.path:
            return f"{self.action.value} on every stream"
        return f"{self.action.value} on '{self.path}'"


def needs_for(method: str, path: str, fork_source: str | None = None) -> tuple[Need, ...]:
    if method in {"GET", "HEAD"}:
        return (Need(Action.READ, path),)
    if method == "POST":
        return (Need(Action.APPEND, path),)
    if method == "PUT":
        if fork_source is not None:
            return (Need(Action.FORK, path), Need(Action.READ, fork_source))
        return (Need(Action.CREATE, path),)
    if method == "DELETE":
        return (Need(Action.DELETE, path),)
    return ()  # OPTIONS: answered without touching a stream


# A listing's cursor is the table key where its scan stopped, which may name a stream outside
# the prefix it lists: a listing needs read on every stream, whatever prefix it asks for.
LISTING_NEEDS = (Need(Action.READ, "", listing=True),)

# A subscription may name any stream, and what it delivers is their data: reading one's state
# needs read on every stream (its webhook URL is shown only to those who may change it);
# claiming its wakes, which moves its cursors, needs consume on every stream as well; creating,
# changing or removing one needs read and create on every stream (and a pull-wake's append on
# its wake stream). Acks, heartbeats and releases carry the wake's own token instead.
SUBSCRIPTION_READ_NEEDS = (Need(Action.READ, ""),)
SUBSCRIPTION_CLAIM_NEEDS = (Need(Action.READ, ""), Need(Action.CONSUME, ""))
SUBSCRIPTION_WRITE_NEEDS = (Need(Action.READ, ""), Need(Action.CREATE, ""))

# The console's operator data: a stream's internals need `operate` on it; the store's figures
# and every subscription's internals, `operate` on every stream.
OPERATOR_NEEDS = (Need(Action.OPERATE, ""),)


def operator_needs(path: str) -> tuple[Need, ...]:
    return (Need(Action.OPERATE, path),)


# ---------------------------------------------------------------- what the request presented


@dataclass(frozen=True)
class Bearer:
    """A verified token."""

    grants: tuple[Grant, ...]
    subject: str | None = None


@dataclass(frozen=True)
class BadToken:
    reason: str  # "expired", "signature does not match", ...


@dataclass(frozen=True)
class SignedRead:
    """A verified signed read URL: reads of every stream under `target` (`is_prefix`) or of
    exactly that stream, until `expires` (Unix seconds)."""

    target: str
    is_prefix: bool
    expires: int

    def covers(self, need: Need) -> bool:
        if need.action is not Action.READ:
            return False
        if self.is_prefix:
            return within(need.path, self.target)
        # A stream URL names one stream: never "every stream" (a need with an empty path).
        return bool(self.target) and need.path == self.target and not need.listing


@dataclass(frozen=True)
class BadSignature:
    reason: str


Presented = Bearer | BadToken | SignedRead | BadSignature | None


# ---------------------------------------------------------------- the outcome


class Via(Enum):
    OPEN = "open"  # access control is off, or the request needs nothing
    PUBLIC = "public"  # a read under a public prefix
    TOKEN = "token"
    SIGNED_URL = "signed-url"


@dataclass(frozen=True)
class Allowed:
    via: Via
    valid_until: float | None = None  # a signed URL's expiry: no cache may keep it longer

    @property
    def private(self) -> bool:
        """A response only this bearer may see: shared caches must not keep it."""
        return self.via is Via.TOKEN


@dataclass(frozen=True)
class Refused:
    status: int
    code: str
    message: str
    challenge: str | None = None  # the WWW-Authenticate value, where one applies


Decision = Allowed | Refused

OPEN = Allowed(Via.OPEN)


def decide(
    needs: Sequence[Need], public_prefixes: Sequence[str], present: Callable[[], Presented]
) -> Decision:
    """Whether a request that needs `needs` may go ahead. What it presents (`present`: the
    verified token or signed URL) is looked at only when a need is not public: public reads
    never cost a verification, and a bad token does not spoil them."""
    if not needs:
        return OPEN
    private = [need for need in needs if not need.public_under(public_prefixes)]
    if not private:
        return Allowed(Via.PUBLIC)
    presented = present()
    match presented:
        case None:
            return Refused(401, "unauthorized", "a bearer token is required", _challenge())
        case BadToken(reason):
            return Refused(
                401, "unauthorized", f"token refused: {reason}", _challenge("invalid_token", reason)
            )
        case Bearer(grants):
            missing = next(
                (n for n in private if not any(n.allowed_by(grant) for grant in grants)), None
            )
            if missing is None:
                return Allowed(Via.TOKEN)
            message = f"the token does not allow {missing.describe()}"
            challenge = _challenge("insufficient_scope", "the token does not allow this request")
            return Refused(403, "forbidden", message, challenge)
        case BadSignature(reason):
            return Refused(403, "forbidden", f"signed URL refused: {reason}")
        case SignedRead():
            outside = next((n for n in private if not presented.covers(n)), None)
            if outside is None:
                return Allowed(Via.SIGNED_URL, valid_until=presented.expires)
            if outside.action is not Action.READ:
                return Refused(403, "forbidden", "a signed URL grants reads only")
            return Refused(403, "forbidden", f"the signed URL does not allow {outside.describe()}")
    raise TypeError(f"not a presented credential: {presented!r}")


def _challenge(error: str | None = None, description: str | None = None) -> str:
    """The WWW-Authenticate value (RFC 6750). Descriptions are this module's own fixed ASCII
    phrases, never text from the request: a header carries Latin-1 only."""
    parts = [f'Bearer realm="{REALM}"']
    if error:
        parts.append(f'error="{error}"')
    if description:
        parts.append(f'error_description="{description}"')
    return ", ".join(parts)
