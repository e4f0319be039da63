"""Wake tokens: the bearer tokens of webhook callbacks and pull-wake claims."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import random
import re

import pytest

from durable_streams_aws.core.subscriptions._signing import SigningKey
from durable_streams_aws.core.subscriptions._tokens import (
    MAX_TOKEN_CHARS,
    TokenSigner,
    WakeToken,
    derive_token_key,
)

KEY = bytes(range(32))
NOW = 1_778_324_210
TOKEN = WakeToken("sub-1", 7, "w_abc123", NOW + 60)
SHAPE = re.compile(r"eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _signed(payload: object, key: bytes = KEY) -> str:
    """A token this key really signed, around any payload: what a bug in issuing could
    produce, to show that verify still refuses contents it does not understand."""
    encoded = _b64(json.dumps(payload).encode())
    return f"{encoded}.{_b64(hmac.new(key, encoded.encode(), hashlib.sha256).digest())}"


def test_round_trip() -> None:
    signer = TokenSigner(KEY)
    text = signer.issue(TOKEN)
    assert SHAPE.fullmatch(text), text
    assert signer.verify(text, now=NOW) == TOKEN


def test_the_payload_is_short_json() -> None:
    encoded = TokenSigner(KEY).issue(TOKEN).split(".")[0]
    payload = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    assert payload == {"sub": "sub-1", "gen": 7, "wake": "w_abc123", "exp": NOW + 60}


def test_the_mac_is_hmac_sha256_of_the_encoded_payload() -> None:
    encoded, mac = TokenSigner(KEY).issue(TOKEN).split(".")
    assert mac == _b64(hmac.new(KEY, encoded.encode(), hashlib.sha256).digest())


@pytest.mark.parametrize(
    "token",
    [
        WakeToken("s", 0, "w", 0),
        WakeToken("sub/\u00e9\u65e5\"\\'", 2**63, "w_" + "x" * 200, 2**40),
        WakeToken("sub-1", 1, "w_abc", -5),  # already expired, but well formed
    ],
)
def test_any_well_formed_token_round_trips(token: WakeToken) -> None:
    signer = TokenSigner(KEY)
    assert signer.verify(signer.issue(token), now=token.expires_at - 1) == token


def test_tokens_differ_in_every_field() -> None:
    signer = TokenSigner(KEY)
    variants = [
        TOKEN,
        WakeToken("sub-2", 7, "w_abc123", NOW + 60),
        WakeToken("sub-1", 8, "w_abc123", NOW + 60),
        WakeToken("sub-1", 7, "w_abc124", NOW + 60),
        WakeToken("sub-1", 7, "w_abc123", NOW + 61),
    ]
    texts = [signer.issue(token) for token in variants]
    assert len(set(texts)) == len(variants)
    assert [signer.verify(text, now=NOW) for text in texts] == variants


def test_expiry() -> None:
    signer = TokenSigner(KEY)
    text = signer.issue(TOKEN)
    expires = TOKEN.expires_at
    for now, valid in [
        (NOW, True),
        (expires - 1, True),
        (expires - 0.001, True),
        (expires, False),
        (expires + 0.5, False),
        (expires + 86_400, False),
    ]:
        assert (signer.verify(text, now=now) is not None) is valid, now


def test_another_key_refuses() -> None:
    text = TokenSigner(KEY).issue(TOKEN)
    assert TokenSigner(bytes(32)).verify(text, now=NOW) is None
    assert TokenSigner(KEY + b"\x01").verify(text, now=NOW) is None
    assert TokenSigner(KEY[:-1] + b"\xff").verify(text, now=NOW) is None


def test_every_single_character_change_is_refused() -> None:
    signer = TokenSigner(KEY)
    text = signer.issue(TOKEN)
    for index in range(len(text)):
        for replacement in "AgQ_-.=":
            if text[index] != replacement:
                changed = text[:index] + replacement + text[index + 1 :]
                assert signer.verify(changed, now=NOW) is None, changed
        assert signer.verify(text[:index] + text[index + 1 :], now=NOW) is None
    for changed in (text + "A", text + "=", "A" + text, text + ".", text + "." + text, text[:-1]):
        assert signer.verify(changed, now=NOW) is None


def test_a_changed_payload_with_the_old_mac_is_refused() -> None:
    signer = TokenSigner(KEY)
    mac = signer.issue(TOKEN).split(".")[1]
    for forged in [
        WakeToken("sub-1", 8, "w_abc123", NOW + 60),  # a later generation
        WakeToken("sub-2", 7, "w_abc123", NOW + 60),  # another subscription
        WakeToken("sub-1", 7, "w_abc123", NOW + 10**9),  # a longer life
    ]:
        encoded = signer.issue(forged).split(".")[0]
        assert signer.verify(f"{encoded}.{mac}", now=NOW) is None


def test_the_mac_in_another_spelling_is_refused() -> None:
    signer = TokenSigner(KEY)
    encoded, mac = signer.issue(TOKEN).split(".")
    standard = base64.b64encode(base64.urlsafe_b64decode(mac + "=")).decode()
    for spelling in (mac + "=", standard, standard.rstrip("="), mac.lower(), mac[:-1]):
        if spelling != mac:
            assert signer.verify(f"{encoded}.{spelling}", now=NOW) is None


@pytest.mark.parametrize(
    "payload",
    [
        {"sub": "s", "gen": 1, "wake": "w"},  # no expiry
        {"sub": "s", "gen": 1, "wake": "w", "exp": NOW + 60, "admin": True},
        {"sub": "", "gen": 1, "wake": "w", "exp": NOW + 60},
        {"sub": "s", "gen": 1, "wake": "", "exp": NOW + 60},
        {"sub": 1, "gen": 1, "wake": "w", "exp": NOW + 60},
        {"sub": "s", "gen": "1", "wake": "w", "exp": NOW + 60},
        {"sub": "s", "gen": True, "wake": "w", "exp": NOW + 60},
        {"sub": "s", "gen": -1, "wake": "w", "exp": NOW + 60},
        {"sub": "s", "gen": 1.0, "wake": "w", "exp": NOW + 60},
        {"sub": "s", "gen": None, "wake": "w", "exp": NOW + 60},
        {"sub": "s", "gen": 1, "wake": ["w"], "exp": NOW + 60},
        {"sub": "s", "gen": 1, "wake": "w", "exp": float(NOW + 60)},
        {"sub": "s", "gen": 1, "wake": "w", "exp": str(NOW + 60)},
        {"sub": "s", "gen": 1, "wake": "w", "exp": True},
        {"sub": "s", "gen": 1, "wake": "w", "exp": float("inf")},
        [1, 2, 3],
        "token",
        None,
        12,
    ],
)
def test_a_signed_payload_of_the_wrong_shape_is_refused(payload: object) -> None:
    assert TokenSigner(KEY).verify(_signed(payload), now=NOW) is None


def test_a_signed_payload_that_is_not_json_is_refused() -> None:
    for raw in (b"", b"{", b"\xff\xfe", b"{}" * 3, b"[" * 100_000):
        encoded = _b64(raw)
        mac = _b64(hmac.new(KEY, encoded.encode(), hashlib.sha256).digest())
        assert TokenSigner(KEY).verify(f"{encoded}.{mac}", now=NOW) is None


@pytest.mark.parametrize(
    "value",
    [None, b"", 0, [], "", ".", "..", "a.b", "eyJ.", ".abc", "Bearer x.y", "x" * 10_000],
)
def test_junk_is_refused(value: object) -> None:
    assert TokenSigner(KEY).verify(value, now=NOW) is None  # type: ignore[arg-type]


def test_an_over_long_token_is_refused_before_any_work() -> None:
    signer = TokenSigner(KEY)
    long_token = WakeToken("s" * MAX_TOKEN_CHARS, 1, "w", NOW + 60)
    assert signer.verify(signer.issue(long_token), now=NOW) is None


def test_fuzz_never_raises() -> None:
    rng = random.Random(20260509)
    signer = TokenSigner(KEY)
    text = signer.issue(TOKEN)
    alphabet = "eyJ0123456789ABCDEFabcdef_-.=+/ \u00e9\x00\n"
    for _ in range(5000):
        choice = rng.random()
        if choice < 0.3:
            fuzzed = bytes(rng.randrange(256) for _ in range(rng.randint(0, 300))).decode("latin-1")
        elif choice < 0.5:
            fuzzed = "".join(chr(rng.randrange(0x110000)) for _ in range(rng.randint(0, 50)))
            fuzzed = fuzzed.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
        elif choice < 0.7:
            fuzzed = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 200)))
        else:
            cut = rng.randrange(len(text))
            fuzzed = text[:cut] + rng.choice(alphabet) + text[cut + rng.randint(0, 4) :]
        result = signer.verify(fuzzed, now=NOW)
        assert result is None or (fuzzed == text and result == TOKEN)


@pytest.mark.parametrize(
    "token",
    [
        WakeToken("", 1, "w", NOW),
        WakeToken("s", 1, "", NOW),
        WakeToken("s", -1, "w", NOW),
        WakeToken("s", True, "w", NOW),
        WakeToken("s", 1, "w", float(NOW)),  # type: ignore[arg-type]
        WakeToken("s", "1", "w", NOW),  # type: ignore[arg-type]
        WakeToken(None, 1, "w", NOW),  # type: ignore[arg-type]
    ],
)
def test_issue_refuses_a_token_verify_would_refuse(token: WakeToken) -> None:
    with pytest.raises(ValueError):
        TokenSigner(KEY).issue(token)


@pytest.mark.parametrize("key", [b"", b"short", b"x" * 15, "x" * 32, None, bytearray(32)])
def test_a_key_is_at_least_16_bytes(key: object) -> None:
    with pytest.raises(ValueError, match="16 bytes"):
        TokenSigner(key)  # type: ignore[arg-type]


def test_the_signer_repr_does_not_show_the_key() -> None:
    assert KEY.hex() not in repr(TokenSigner(KEY)) and "\\x01" not in repr(TokenSigner(KEY))


def test_wake_tokens_are_immutable_values() -> None:
    assert WakeToken("s", 1, "w", 5) == WakeToken("s", 1, "w", 5)
    assert len({WakeToken("s", 1, "w", 5), WakeToken("s", 1, "w", 5)}) == 1
    with pytest.raises(AttributeError):
        TOKEN.generation = 8  # type: ignore[misc]


def test_derive_token_key() -> None:
    seed = bytes(range(32))
    key = derive_token_key(seed)
    assert key == hmac.new(seed, b"durable-streams callback tokens", hashlib.sha256).digest()
    assert len(key) == 32
    assert derive_token_key(seed) == key
    assert derive_token_key(bytes(32)) != key
    assert key != seed


def test_one_secret_gives_both_keys() -> None:
    signing = SigningKey.from_secret_text("a Secrets Manager random string")
    again = SigningKey.from_secret_text("a Secrets Manager random string")
    signer = TokenSigner(derive_token_key(signing.seed))
    # A restarted server derives the same token key, so outstanding tokens stay valid.
    text = signer.issue(TOKEN)
    assert TokenSigner(derive_token_key(again.seed)).verify(text, now=NOW) == TOKEN
    # The token key is neither the signing seed nor a key another secret would give.
    assert derive_token_key(signing.seed) != signing.seed
    other = SigningKey.from_secret_text("another string")
    assert TokenSigner(derive_token_key(other.seed)).verify(text, now=NOW) is None
