"""What a token allows: actions on stream path prefixes, read from one claim.

A grant is written `<actions>:<prefix>`, for example `read,append:chat/` or `read:*`, and a
token carries them separated by spaces in a string claim (the OAuth `scope` convention: ASCII
spaces only, so a no-break space or another Unicode space never splits an entry) or as a list
of strings. Prefixes are relative to the stream root and match whole path segments: `chat`
covers `chat` and `chat/room-1`, not `chatroom`; `chat/` covers everything under `chat/`; `*`
covers every stream (an empty prefix, `read:` or `read:/`, is no grant at all). Entries that
are not grants (`openid`, another API's scopes) are ignored, so one token can serve several
audiences.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any

EVERY_STREAM = "*"


class Action(Enum):
    READ = "read"
    APPEND = "append"  # appends, producer appends, and closing the stream
    CREATE = "create"
    DELETE = "delete"
    FORK = "fork"  # create a stream as a fork (which also needs READ on its source)
    # Claim a pull-wake subscription's wakes (and so acknowledge and release them with the
    # wake's token): a write to the subscription, which neither a public prefix nor a signed
    # read URL can grant.
    CONSUME = "consume"
    # The console's operator views of the streams under a prefix: their producers, sealing,
    # forks; and, on every stream (`operate:*`), the store's figures and the subscriptions'
    # internals. Nothing a reader of the stream's data may see by reading it.
    OPERATE = "operate"


_ACTIONS = {action.value: action for action in Action}


@dataclass(frozen=True)
class Grant:
    actions: frozenset[Action]
    prefix: str  # "" covers every stream

    def allows(self, action: Action, path: str) -> bool:
        return action in self.actions and within(path, self.prefix)

    def render(self) -> str:
        names = ",".join(sorted(action.value for action in self.actions))
        return f"{names}:{self.prefix or EVERY_STREAM}"


def within(path: str, prefix: str) -> bool:
    """Whether `path` is `prefix` itself or lies under it, segment by segment."""
    if not prefix or prefix.endswith("/"):
        return path.startswith(prefix)
    return path == prefix or path.startswith(prefix + "/")


def parse_grant(entry: str) -> Grant | None:
    """One `<actions>:<prefix>` entry, or None when it is not a grant of ours."""
    names, colon, prefix = entry.partition(":")
    if not colon:
        return None
    actions = frozenset(_ACTIONS[name] for name in names.split(",") if name in _ACTIONS)
    if not actions or any(name not in _ACTIONS for name in names.split(",")):
        return None
    if prefix == EVERY_STREAM:
        return Grant(actions, "")
    prefix = prefix.lstrip("/")
    # Only `*` means every stream: an empty prefix is more likely a template's empty variable
    # (`read:{tenant}/` with no tenant) than a wish to grant everything.
    return Grant(actions, prefix) if prefix else None


def parse_grants(claim: Any) -> tuple[Grant, ...]:
    """The grants in a claim's value: a space-separated string or a list of strings."""
    if isinstance(claim, str):
        entries: Iterable[Any] = (entry for entry in claim.split(" ") if entry)
    elif isinstance(claim, list):
        entries = claim
    else:
        return ()
    grants = (parse_grant(entry) for entry in entries if isinstance(entry, str))
    return tuple(grant for grant in grants if grant is not None)


def render_grants(grants: Iterable[Grant]) -> str:
    return " ".join(grant.render() for grant in grants)
