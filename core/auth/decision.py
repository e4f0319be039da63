"""Who may do what: one pure decision per request, from what the request needs and what it
presents. No I/O here: the caller verifies a token or a signed URL first and passes the result.

- A request needs actions on paths (`needs_for`): reads `read`, appends and closes `append`,
  creates `create`, deletes `delete`; a fork needs `fork` on the new stream and `read` on its
  source. A listing needs `read` over the whole prefix it lists.
- Reads under a public prefix need nothing, whatever else the request carries.
- Otherwise a bearer token must grant every need (401 without one or with a bad one, 403 when it
  grants too little), or, for reads only, a signed read URL must cover the path (403 when it
  does not, or has expired, or its signature is wrong: the URL itself is the credential, as
  with S3's and CloudFront's signed URLs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from .grants import Action, Grant, covers, within

REALM = "durable-streams"


@dataclass(frozen=True)
class Need:
    action: Action
    path: str
    listing: bool = False  # `path` is a listing's prefix: everything under it must be allowed

    def allowed_by(self, grant: Grant) -> bool:
        if self.listing:
            return grant.covers_prefix(self.action, self.path)
        return grant.allows(self.action, self.path)

    def public_under(self, prefixes: Sequence[str]) -> bool:
        if self.action is not Action.READ:
            return False
        inside = covers if self.listing else _within_reversed
        return any(inside(prefix, self.path) for prefix in prefixes)

    def describe(self) -> str:
        what = f"streams under '{self.path}'" if self.listing else f"'{self.path}'"
        return f"{self.action.value} on {what}"


def _within_reversed(prefix: str, path: str) -> bool:
    return within(path, prefix)


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


def listing_needs(prefix: str) -> tuple[Need, ...]:
    return (Need(Action.READ, prefix, listing=True),)


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
    """A verified signed read URL: reads of `prefix` (or of exactly `path`) until `expires`."""

    target: str
    is_prefix: bool
    expires: int

    def covers(self, need: Need) -> bool:
        if need.action is not Action.READ:
            return False
        if need.listing:
            return self.is_prefix and covers(self.target, need.path)
        return within(need.path, self.target) if self.is_prefix else need.path == self.target


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


def decide(needs: Sequence[Need], public_prefixes: Sequence[str], presented: Presented) -> Decision:
    return without_credentials(needs, public_prefixes) or judge(needs, presented)


def without_credentials(needs: Sequence[Need], public_prefixes: Sequence[str]) -> Allowed | None:
    """Requests allowed whatever they present: those that need nothing, and public reads."""
    if not needs:
        return OPEN
    if all(need.public_under(public_prefixes) for need in needs):
        return Allowed(Via.PUBLIC)
    return None


def judge(needs: Sequence[Need], presented: Presented) -> Decision:
    """What the credential presented allows, for a request that needs one."""
    match presented:
        case None:
            return Refused(401, "unauthorized", "a bearer token is required", _challenge())
        case BadToken(reason):
            return Refused(
                401, "unauthorized", f"token refused: {reason}", _challenge("invalid_token", reason)
            )
        case Bearer(grants):
            missing = next(
                (n for n in needs if not any(n.allowed_by(grant) for grant in grants)), None
            )
            if missing is None:
                return Allowed(Via.TOKEN)
            message = f"the token does not allow {missing.describe()}"
            return Refused(403, "forbidden", message, _challenge("insufficient_scope", message))
        case BadSignature(reason):
            return Refused(403, "forbidden", f"signed URL refused: {reason}")
        case SignedRead():
            outside = next((n for n in needs if not presented.covers(n)), None)
            if outside is None:
                return Allowed(Via.SIGNED_URL, valid_until=presented.expires)
            if outside.action is not Action.READ:
                return Refused(403, "forbidden", "a signed URL grants reads only")
            return Refused(403, "forbidden", f"the signed URL does not cover {outside.path!r}")
    raise TypeError(f"not a presented credential: {presented!r}")


def _challenge(error: str | None = None, description: str | None = None) -> str:
    parts = [f'Bearer realm="{REALM}"']
    if error:
        parts.append(f'error="{error}"')
    if description:
        parts.append(f'error_description="{description.replace(chr(34), chr(39))}"')
    return ", ".join(parts)
