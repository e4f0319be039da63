"""The pure access-control rules: grants, decisions, signed URLs and key sets."""

from __future__ import annotations

import json

import pytest

from durable_streams_aws.core.auth import (
    LISTING_NEEDS,
    OPEN,
    SUBSCRIPTION_CLAIM_NEEDS,
    SUBSCRIPTION_READ_NEEDS,
    SUBSCRIPTION_WRITE_NEEDS,
    Action,
    Allowed,
    BadSignature,
    BadToken,
    Bearer,
    KeyConfigError,
    KeysUnavailable,
    Presented,
    Refused,
    SignedRead,
    StoredValue,
    Via,
    needs_for,
    parse_grant,
    parse_grants,
    parse_key_set,
    render_grants,
    round_expiry,
    sign,
)
from durable_streams_aws.core.auth import decide as decide_with
from durable_streams_aws.core.auth.decision import DEFAULT_MAX_LIFETIME_SECONDS
from durable_streams_aws.core.auth.grants import within
from durable_streams_aws.core.auth.signed_urls import verify
from durable_streams_aws.core.config import Settings

SECRET = "k" * 32
KEYS = parse_key_set(SECRET)
NOW = 1_900_000_000.0


# ---------------------------------------------------------------- grants


@pytest.mark.parametrize(
    ("path", "prefix", "inside"),
    [
        ("chat", "chat", True),
        ("chat/room", "chat", True),
        ("chatroom", "chat", False),
        ("chat/room", "chat/", True),
        ("chat", "chat/", False),
        ("anything/at/all", "", True),
        ("chat/room/1", "chat/room", True),
        ("chat/roomy", "chat/room", False),
    ],
)
def test_prefixes_match_whole_segments(path: str, prefix: str, inside: bool) -> None:
    assert within(path, prefix) is inside


def test_grants_parse_from_a_scope_string_or_a_list_and_ignore_foreign_scopes() -> None:
    grants = parse_grants("openid read,append:chat/ profile delete:/tmp/x fork:*")
    assert [(sorted(a.value for a in g.actions), g.prefix) for g in grants] == [
        (["append", "read"], "chat/"),
        (["delete"], "tmp/x"),
        (["fork"], ""),
    ]
    assert parse_grants(["read:a", 7, "write:b"]) == parse_grants("read:a")
    assert parse_grants(None) == () and parse_grants({"read": "a"}) == ()
    assert parse_grant("read,bogus:a") is None  # one unknown action voids the entry
    # Only `*` means every stream: an empty prefix is no grant (a template's empty variable).
    assert parse_grant("read:") is None and parse_grant("read:/") is None
    assert render_grants(parse_grants("append,read:chat/ read:*")) == "append,read:chat/ read:*"


def test_scopes_split_on_ascii_spaces_only() -> None:
    """OAuth separates scope tokens with ASCII spaces: a no-break space (or any other Unicode
    space) is part of an entry, never a separator that makes two grants of one."""
    assert [g.prefix for g in parse_grants("read:a  read:b ")] == ["a", "b"]
    assert [g.prefix for g in parse_grants("read:chat\u00a0append:x")] == ["chat\u00a0append:x"]
    assert all(Action.DELETE not in g.actions for g in parse_grants("read:a\u2003delete:*"))
    assert parse_grants("read:a\tdelete:*") == (parse_grant("read:a\tdelete:*"),)


# ---------------------------------------------------------------- needs


def test_what_each_operation_needs() -> None:
    assert [(n.action, n.path) for n in needs_for("GET", "a")] == [(Action.READ, "a")]
    assert [(n.action, n.path) for n in needs_for("HEAD", "a")] == [(Action.READ, "a")]
    assert [(n.action, n.path) for n in needs_for("POST", "a")] == [(Action.APPEND, "a")]
    assert [(n.action, n.path) for n in needs_for("PUT", "a")] == [(Action.CREATE, "a")]
    assert [(n.action, n.path) for n in needs_for("DELETE", "a")] == [(Action.DELETE, "a")]
    assert [(n.action, n.path) for n in needs_for("PUT", "a", "src")] == [
        (Action.FORK, "a"),
        (Action.READ, "src"),
    ]
    assert needs_for("OPTIONS", "a") == ()


SUBSCRIPTION_PRINCIPALS = {
    "public *": (("",), None),
    "signed URL scope=*": ((), SignedRead("", True, int(NOW) + 60)),
    "read:* token": ((), Bearer(parse_grants("read:*"))),
    "read,create:* token": ((), Bearer(parse_grants("read,create:*"))),
    "read,consume:* token": ((), Bearer(parse_grants("read,consume:*"))),
}


@pytest.mark.parametrize(
    ("needs", "allowed"),
    [
        (SUBSCRIPTION_READ_NEEDS, set(SUBSCRIPTION_PRINCIPALS)),
        (SUBSCRIPTION_CLAIM_NEEDS, {"read,consume:* token"}),
        (SUBSCRIPTION_WRITE_NEEDS, {"read,create:* token"}),
    ],
)
def test_claiming_and_changing_subscriptions_are_writes(needs: tuple, allowed: set) -> None:
    """Neither a public prefix nor a signed read URL (nor a read grant) claims a wake: claims
    move a subscription's cursors. Reading a subscription's state is a read of every stream."""
    for name, (public, presented) in SUBSCRIPTION_PRINCIPALS.items():
        decision = decide(needs, public, presented)
        assert isinstance(decision, Allowed) is (name in allowed), name


def test_a_stream_url_for_the_empty_path_covers_nothing() -> None:
    """A stream URL for "" would cover needs on every stream (the control API's): signing one
    is refused, and one made by hand verifies as nothing."""
    with pytest.raises(ValueError):
        sign(KEYS, "/", int(NOW) + 60)
    with pytest.raises(ValueError):
        sign(KEYS, "", int(NOW) + 60)
    forged = sign(KEYS, "a", int(NOW) + 60)  # the MAC below is recomputed for the empty path
    from durable_streams_aws.core.auth.signed_urls import _mac

    forged["signature"] = _mac(KEYS.signing_key[1], "", False, int(NOW) + 60)
    assert verify(KEYS, forged, "", NOW) == BadSignature("a stream URL names a stream")
    by_hand = SignedRead("", False, int(NOW) + 60)
    assert isinstance(decide(SUBSCRIPTION_READ_NEEDS, (), by_hand), Refused)


def test_credentials_may_not_outlive_the_maximum_lifetime() -> None:
    assert Settings().auth_max_lifetime == DEFAULT_MAX_LIFETIME_SECONDS == 7 * 24 * 3600
    far = sign(KEYS, "a", int(NOW) + DEFAULT_MAX_LIFETIME_SECONDS + 1)
    assert verify(KEYS, far, "a", NOW) == BadSignature("expires too far ahead")
    forever = sign(KEYS, "a", 10**11)
    assert verify(KEYS, forever, "a", NOW) == BadSignature("expires too far ahead")
    assert verify(KEYS, forever, "a", NOW, max_lifetime=10**12) == SignedRead("a", False, 10**11)
    edge = sign(KEYS, "a", int(NOW) + DEFAULT_MAX_LIFETIME_SECONDS)
    assert isinstance(verify(KEYS, edge, "a", NOW), SignedRead)


# ---------------------------------------------------------------- decisions

PUBLIC = ("public/",)


def decide(needs: tuple, prefixes: tuple, presented: Presented) -> object:
    return decide_with(needs, prefixes, lambda: presented)


def bearer(scope: str) -> Bearer:
    return Bearer(parse_grants(scope))


def test_nothing_needed_is_open_and_public_reads_need_no_credential() -> None:
    assert decide((), PUBLIC, None) == OPEN
    assert decide(needs_for("GET", "public/a"), PUBLIC, None) == Allowed(Via.PUBLIC)
    # Even a bad token does not spoil a public read: the prefix decides first.
    assert decide(needs_for("GET", "public/a"), PUBLIC, BadToken("expired")) == Allowed(Via.PUBLIC)
    assert isinstance(decide(needs_for("POST", "public/a"), PUBLIC, None), Refused)
    # A fork of a public stream still needs fork on the new one, and no read grant on it.
    assert decide(needs_for("PUT", "mine", "public/a"), PUBLIC, None).status == 401  # type: ignore[attr-defined]
    assert decide(needs_for("PUT", "mine", "public/a"), PUBLIC, bearer("fork:mine")) == Allowed(
        Via.TOKEN
    )


def test_credentials_are_looked_at_only_when_a_need_is_not_public() -> None:
    looked: list[int] = []

    def present() -> Presented:
        looked.append(1)
        return None

    decide_with(needs_for("GET", "public/a"), PUBLIC, present)
    decide_with(needs_for("OPTIONS", "a"), PUBLIC, present)
    assert looked == []
    decide_with(needs_for("GET", "private/a"), PUBLIC, present)
    assert looked == [1]


def test_missing_and_bad_tokens_are_401_with_a_challenge() -> None:
    missing = decide(needs_for("GET", "a"), PUBLIC, None)
    assert isinstance(missing, Refused) and missing.status == 401
    assert missing.challenge == 'Bearer realm="durable-streams"'
    bad = decide(needs_for("GET", "a"), PUBLIC, BadToken("expired"))
    assert isinstance(bad, Refused) and bad.status == 401
    assert bad.challenge is not None and 'error="invalid_token"' in bad.challenge
    assert "expired" in bad.message


def test_a_token_must_grant_every_need() -> None:
    fork = needs_for("PUT", "mine/f", "theirs/s")
    assert decide(fork, (), bearer("fork:mine/ read:theirs/")) == Allowed(Via.TOKEN)
    short = decide(fork, (), bearer("fork:mine/"))
    assert isinstance(short, Refused) and short.status == 403
    assert "read on 'theirs/s'" in short.message
    assert short.challenge == (
        'Bearer realm="durable-streams", error="insufficient_scope", '
        'error_description="the token does not allow this request"'
    )
    # The path (any Unicode) is in the body, never in the Latin-1 header.
    unicode = decide(needs_for("GET", "日本"), (), bearer("read:x"))
    assert "日本" in unicode.message and unicode.challenge.isascii()  # type: ignore[union-attr]
    assert decide(needs_for("POST", "mine/a"), (), bearer("read,create:mine/")).status == 403  # type: ignore[union-attr]


def test_token_reads_are_private_and_others_are_not() -> None:
    assert decide(needs_for("GET", "a"), (), bearer("read:a")).private  # type: ignore[union-attr]
    assert not Allowed(Via.PUBLIC).private and not Allowed(Via.SIGNED_URL, 5).private


def test_listings_need_read_on_every_stream() -> None:
    assert decide(LISTING_NEEDS, (), bearer("read:*")) == Allowed(Via.TOKEN)
    refused = decide(LISTING_NEEDS, (), bearer("read:chat/"))
    assert isinstance(refused, Refused) and "every stream" in refused.message
    assert decide(LISTING_NEEDS, ("",), None) == Allowed(Via.PUBLIC)
    assert isinstance(decide(LISTING_NEEDS, PUBLIC, None), Refused)
    assert decide(LISTING_NEEDS, (), SignedRead("", True, 10)) == Allowed(Via.SIGNED_URL, 10)
    assert isinstance(decide(LISTING_NEEDS, (), SignedRead("", False, 10)), Refused)
    assert isinstance(decide(LISTING_NEEDS, (), SignedRead("chat/", True, 10)), Refused)


def test_signed_reads_cover_their_target_only_and_never_writes() -> None:
    stream = SignedRead("chat/a", is_prefix=False, expires=10)
    prefix = SignedRead("chat/", is_prefix=True, expires=10)
    assert decide(needs_for("GET", "chat/a"), (), stream) == Allowed(Via.SIGNED_URL, 10)
    assert decide(needs_for("GET", "chat/a/b"), (), stream).status == 403  # type: ignore[union-attr]
    assert decide(needs_for("GET", "chat/a/b"), (), prefix) == Allowed(Via.SIGNED_URL, 10)
    write = decide(needs_for("POST", "chat/a"), (), stream)
    assert isinstance(write, Refused) and write.message == "a signed URL grants reads only"
    assert write.challenge is None
    refused = decide(needs_for("GET", "chat/a"), (), BadSignature("expired"))
    assert isinstance(refused, Refused) and refused.status == 403 and refused.challenge is None


# ---------------------------------------------------------------- signed URLs


def test_expiries_round_up_to_the_step_so_readers_share_a_url() -> None:
    assert round_expiry(1000, 600, 300) == 1800
    assert round_expiry(1001, 600, 300) == 1800
    assert round_expiry(1200, 600, 300) == 1800
    assert round_expiry(1201, 600, 300) == 2100


def test_a_signature_verifies_for_its_path_until_it_expires() -> None:
    params = sign(KEYS, "chat/a", int(NOW) + 60)
    assert set(params) == {"expires", "signature"}
    assert verify(KEYS, params, "chat/a", NOW) == SignedRead("chat/a", False, int(NOW) + 60)
    assert verify(KEYS, params, "chat/b", NOW) == BadSignature("signature does not match")
    assert verify(KEYS, params, "chat/a", NOW + 60) == BadSignature("expired")
    later = {**params, "expires": str(int(NOW) + 3600)}
    assert verify(KEYS, later, "chat/a", NOW) == BadSignature("signature does not match")
    for bad in ("soon", "²", "0" + str(int(NOW) + 60), "-5", ""):
        assert verify(KEYS, {**params, "expires": bad}, "chat/a", NOW) == BadSignature(
            "expires must be a Unix time in seconds"
        )
    for odd in ("é", "x" * 5000, ""):
        assert verify(KEYS, {**params, "signature": odd}, "chat/a", NOW) == BadSignature(
            "signature does not match"
        )
    control = {**sign(KEYS, "a", int(NOW) + 60, prefix=True), "scope": "a\x00"}
    assert verify(KEYS, control, "a/b", NOW) == BadSignature("scope is not a path prefix")


def test_a_stream_signature_is_never_a_prefix_signature() -> None:
    stream = sign(KEYS, "chat/a", int(NOW) + 60)
    as_prefix = {**stream, "scope": "chat/a"}
    assert verify(KEYS, as_prefix, "chat/a/b", NOW) == BadSignature("signature does not match")
    prefix = sign(KEYS, "/chat/", int(NOW) + 60, prefix=True)
    assert prefix["scope"] == "chat/"
    assert verify(KEYS, prefix, "chat/z", NOW) == SignedRead("chat/", True, int(NOW) + 60)


def test_signatures_name_their_key_during_a_rotation() -> None:
    old = parse_key_set(json.dumps({"keys": [{"kid": "old", "secret": "o" * 32}]}))
    rotated = parse_key_set(
        json.dumps(
            {"keys": [{"kid": "new", "secret": "n" * 32}, {"kid": "old", "secret": "o" * 32}]}
        )
    )
    retired = parse_key_set(json.dumps({"keys": [{"kid": "new", "secret": "n" * 32}]}))
    params = sign(old, "a", int(NOW) + 60)
    assert params["kid"] == "old"
    assert isinstance(verify(rotated, params, "a", NOW), SignedRead)
    assert verify(retired, params, "a", NOW) == BadSignature("signature does not match")
    assert sign(rotated, "a", int(NOW) + 60)["kid"] == "new"


# ---------------------------------------------------------------- key sets


def test_key_sets_parse_from_plain_text_or_json() -> None:
    assert parse_key_set(SECRET).signing_key == ("", SECRET.encode())
    keys = parse_key_set(
        json.dumps({"keys": [{"kid": "b", "secret": "b" * 32}, {"secret": "a" * 32}]})
    )
    assert keys.signing_key == ("b", b"b" * 32)
    assert keys.find(None) == b"a" * 32 and keys.find("b") == b"b" * 32 and keys.find("c") is None


@pytest.mark.parametrize(
    "text",
    [
        "short",
        '{"keys": []}',
        '{"keys": [{"kid": "a"}]}',
        '{"nokeys": 1}',
        json.dumps({"keys": [{"kid": "a", "secret": "x" * 32}, {"kid": "a", "secret": "y" * 32}]}),
    ],
)
def test_unusable_key_sets_are_refused(text: str) -> None:
    with pytest.raises(KeyConfigError):
        parse_key_set(text)


def test_only_an_explicit_star_signs_every_stream() -> None:
    with pytest.raises(ValueError):
        sign(KEYS, "/", int(NOW) + 60, prefix=True)
    everything = sign(KEYS, "*", int(NOW) + 60, prefix=True)
    assert verify(KEYS, everything, "any/stream", NOW) == SignedRead("", True, int(NOW) + 60)
    empty = {**everything, "scope": ""}
    assert verify(KEYS, empty, "any/stream", NOW) == BadSignature("scope is empty")


# ---------------------------------------------------------------- stored values


class FlakyStore(StoredValue[str]):
    """A stored value whose store answers from a script: text, or an exception to raise."""

    def __init__(self, answers: list[object]) -> None:
        super().__init__(str.upper, secret_id="arn:secret", max_age=60)
        self.answers = answers
        self.fetches = 0

    def _fetch(self) -> str:
        self.fetches += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return str(answer)


def test_a_stored_value_is_read_once_per_max_age(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [100.0]
    monkeypatch.setattr("durable_streams_aws.core.auth.keys.time.monotonic", lambda: clock[0])
    store = FlakyStore(["one", "two"])
    assert store.current() == "ONE" and store.current() == "ONE"
    assert store.fetches == 1
    clock[0] += 61
    assert store.current() == "TWO" and store.fetches == 2


def test_a_failed_refresh_keeps_the_last_good_value_and_retries_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [100.0]
    monkeypatch.setattr("durable_streams_aws.core.auth.keys.time.monotonic", lambda: clock[0])
    store = FlakyStore(
        ["one", KeysUnavailable("timeout"), UnicodeDecodeError("utf-8", b"", 0, 1, "x"), "two"]
    )
    assert store.current() == "ONE"
    clock[0] += 61
    assert store.current() == "ONE"  # unreachable: kept
    assert store.current() == "ONE" and store.fetches == 2  # not retried at once
    clock[0] += StoredValue.RETRY_SECONDS
    assert store.current() == "ONE" and store.fetches == 3  # any error: kept
    clock[0] += StoredValue.RETRY_SECONDS
    assert store.current() == "TWO"


def test_without_a_good_value_a_failed_read_is_unavailable() -> None:
    with pytest.raises(KeysUnavailable):
        FlakyStore([RuntimeError("no route")]).current()
