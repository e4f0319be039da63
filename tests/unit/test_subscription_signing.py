"""Webhook signatures: the keys, their JWKS and kids, and verification as a receiver does it."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from durable_streams_aws.core.subscriptions._signing import (
    REPLAY_WINDOW_SECONDS,
    SigningKey,
    jwks,
    verify_signature,
)

# RFC 8037 appendix A: an Ed25519 key, its public `x` and its RFC 7638 thumbprint.
RFC8037_SEED = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"
RFC8037_X = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
RFC8037_THUMBPRINT = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"

NOW = 1_778_324_210
BODY = json.dumps({"subscription_id": "sub-1", "wake_id": "w_abc", "generation": 7}).encode()
HEADER = re.compile(
    r"t=(?P<t>[0-9]+),kid=(?P<kid>ds_[A-Za-z0-9_-]{43}),ed25519=(?P<sig>[A-Za-z0-9_-]{86})"
)


def _b64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _key(n: int) -> SigningKey:
    return SigningKey.from_seed(bytes([n]) * 32)


def test_the_rfc_8037_key() -> None:
    key = SigningKey.from_seed(_b64(RFC8037_SEED))
    assert key.public_jwk()["x"] == RFC8037_X
    assert key.kid == "ds_" + RFC8037_THUMBPRINT


def test_the_kid_is_the_thumbprint_of_the_public_key() -> None:
    key = SigningKey.generate()
    x = key.public_jwk()["x"]
    canonical = '{"crv":"Ed25519","kty":"OKP","x":"' + x + '"}'
    digest = base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest()).rstrip(b"=")
    assert key.kid == "ds_" + digest.decode()


def test_the_kid_is_stable_for_a_seed() -> None:
    seed = bytes(range(32))
    kids = {SigningKey.from_seed(seed).kid for _ in range(5)}
    assert len(kids) == 1
    again = SigningKey.from_seed(SigningKey.from_seed(seed).seed)
    assert again.kid in kids and again.seed == seed


def test_different_keys_have_different_kids() -> None:
    keys = [_key(n) for n in range(20)] + [SigningKey.generate() for _ in range(20)]
    assert len({key.kid for key in keys}) == 40
    assert len({key.seed for key in keys}) == 40


def test_generated_keys_round_trip_through_their_seed() -> None:
    key = SigningKey.generate()
    assert len(key.seed) == 32
    restored = SigningKey.from_seed(key.seed)
    assert restored.kid == key.kid
    assert restored.public_jwk() == key.public_jwk()
    # Ed25519 signatures are deterministic: the restored key signs identically.
    assert restored.signature_header(BODY, NOW) == key.signature_header(BODY, NOW)


@pytest.mark.parametrize("seed", [b"", b"x" * 31, b"x" * 33, "x" * 32, None, bytearray(32)])
def test_a_seed_is_32_bytes(seed: object) -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        SigningKey.from_seed(seed)  # type: ignore[arg-type]


def test_a_key_from_secret_text() -> None:
    secret = "kY8#pQ2!vZ9@wL4$mN7%rT1^"
    key = SigningKey.from_secret_text(secret)
    assert key.kid == SigningKey.from_secret_text(secret).kid
    expected = hashlib.sha256(b"durable-streams webhook signing\0" + secret.encode()).digest()
    assert key.seed == expected
    assert SigningKey.from_secret_text(secret + "x").kid != key.kid
    # The label keeps the seed apart from a plain hash of the secret.
    assert key.seed != hashlib.sha256(secret.encode()).digest()
    assert SigningKey.from_secret_text("\u00e9t\u00e9-secret").kid  # any Unicode text


@pytest.mark.parametrize("text", ["", " ", "\n\t", None])
def test_an_empty_secret_is_refused(text: object) -> None:
    with pytest.raises(ValueError, match="empty"):
        SigningKey.from_secret_text(text)  # type: ignore[arg-type]


def test_the_public_jwk() -> None:
    key = _key(1)
    jwk = key.public_jwk()
    assert jwk == {
        "kty": "OKP",
        "crv": "Ed25519",
        "kid": key.kid,
        "use": "sig",
        "alg": "EdDSA",
        "x": jwk["x"],
    }
    assert len(_b64(jwk["x"])) == 32
    assert "=" not in jwk["x"]
    assert "d" not in jwk  # the private part is never published


def test_the_repr_does_not_show_the_key() -> None:
    key = _key(7)
    text = repr(key)
    assert key.kid in text
    assert key.seed.hex() not in text and "\\x07" not in text


def test_jwks() -> None:
    active, previous = _key(1), _key(2)
    document = jwks([active, previous])
    assert document == {"keys": [active.public_jwk(), previous.public_jwk()]}
    assert json.loads(json.dumps(document)) == document
    assert jwks([]) == {"keys": []}


def test_jwks_lists_each_key_once() -> None:
    active, previous = _key(1), _key(2)
    document = jwks([active, previous, SigningKey.from_seed(active.seed), previous])
    assert [jwk["kid"] for jwk in document["keys"]] == [active.kid, previous.kid]


def test_the_signature_header() -> None:
    key = _key(3)
    header = key.signature_header(BODY, NOW)
    parsed = HEADER.fullmatch(header)
    assert parsed is not None, header
    assert parsed["t"] == str(NOW) and parsed["kid"] == key.kid
    # Checked with the library directly: Ed25519 over "<t>.<raw body>".
    public = Ed25519PublicKey.from_public_bytes(_b64(key.public_jwk()["x"]))
    public.verify(_b64(parsed["sig"]), f"{NOW}.".encode() + BODY)


@pytest.mark.parametrize("timestamp", [-1, 1.5, "1778324210", True, None])
def test_the_timestamp_is_a_non_negative_integer(timestamp: object) -> None:
    with pytest.raises(ValueError):
        _key(1).signature_header(BODY, timestamp)  # type: ignore[arg-type]


@pytest.mark.parametrize("body", [b"", b"{}", BODY, bytes(range(256)) * 40])
def test_round_trip(body: bytes) -> None:
    key = _key(4)
    header = key.signature_header(body, NOW)
    assert verify_signature(header, body, jwks([key]), now=NOW)


def test_a_timestamp_of_zero_round_trips() -> None:
    key = _key(4)
    assert verify_signature(key.signature_header(BODY, 0), BODY, jwks([key]), now=10)


def test_the_replay_window() -> None:
    key = _key(5)
    keys = jwks([key])
    header = key.signature_header(BODY, NOW)
    assert REPLAY_WINDOW_SECONDS == 300
    for now, valid in [
        (NOW, True),
        (NOW + 300, True),
        (NOW + 300.5, False),
        (NOW + 301, False),
        (NOW + 86_400, False),
        (NOW - 300, True),  # receiver's clock behind the server's
        (NOW - 301, False),
    ]:
        assert verify_signature(header, BODY, keys, now=now) is valid, now
    assert verify_signature(header, BODY, keys, now=NOW + 3000, window=3600)
    assert not verify_signature(header, BODY, keys, now=NOW + 1, window=0)


def test_key_rotation() -> None:
    old, new = _key(10), _key(11)
    published = jwks([new, old])
    assert verify_signature(old.signature_header(BODY, NOW), BODY, published, now=NOW)
    assert verify_signature(new.signature_header(BODY, NOW), BODY, published, now=NOW)
    # Once the old key is withdrawn, its signatures stop verifying.
    assert not verify_signature(old.signature_header(BODY, NOW), BODY, jwks([new]), now=NOW)


def test_a_changed_body_fails() -> None:
    key = _key(6)
    keys = jwks([key])
    header = key.signature_header(BODY, NOW)
    for index in range(len(BODY)):
        changed = bytearray(BODY)
        changed[index] ^= 0x01
        assert not verify_signature(header, bytes(changed), keys, now=NOW), index
    assert not verify_signature(header, BODY + b" ", keys, now=NOW)
    assert not verify_signature(header, BODY[:-1], keys, now=NOW)
    assert not verify_signature(header, b"", keys, now=NOW)
    assert not verify_signature(header, BODY.decode(), keys, now=NOW)  # type: ignore[arg-type]


def test_a_changed_timestamp_fails() -> None:
    key = _key(6)
    keys = jwks([key])
    header = key.signature_header(BODY, NOW)
    for t in (NOW - 1, NOW + 1, NOW * 10):
        forged = header.replace(f"t={NOW}", f"t={t}")
        assert not verify_signature(forged, BODY, keys, now=t)


def test_a_changed_kid_fails() -> None:
    signer, other = _key(6), _key(7)
    header = signer.signature_header(BODY, NOW)
    # The other key is published and named, but did not make this signature.
    forged = header.replace(signer.kid, other.kid)
    assert not verify_signature(forged, BODY, jwks([signer, other]), now=NOW)
    # A kid nobody published.
    assert not verify_signature(header, BODY, jwks([other]), now=NOW)
    assert not verify_signature(header.replace(signer.kid, "ds_x"), BODY, jwks([signer]), now=NOW)


def test_a_changed_signature_fails() -> None:
    key = _key(8)
    keys = jwks([key])
    header = key.signature_header(BODY, NOW)
    start = header.index("ed25519=") + len("ed25519=")
    for index in range(start, len(header)):
        for replacement in "AQ_-":
            if header[index] != replacement:
                forged = header[:index] + replacement + header[index + 1 :]
                assert not verify_signature(forged, BODY, keys, now=NOW), forged
    signature = header[start:]
    for forged_signature in (
        signature[:-1],
        signature + "A",
        signature + "==",
        signature.replace("-", "+").replace("_", "/") + "==",
        "A" * 86,
        "",
    ):
        assert not verify_signature(header[:start] + forged_signature, BODY, keys, now=NOW)
    other = _key(9).signature_header(BODY, NOW).split("ed25519=")[1]
    assert not verify_signature(header[:start] + other, BODY, keys, now=NOW)


def test_the_header_is_parsed_strictly() -> None:
    key = _key(12)
    keys = jwks([key])
    header = key.signature_header(BODY, NOW)
    t, kid, sig = header.split(",")
    assert verify_signature(",".join([sig, t, kid]), BODY, keys, now=NOW)  # any order
    for malformed in [
        "",
        header + ",",
        "," + header,
        header + ",v1=abc",
        header + "," + t,  # a parameter twice
        ",".join([t, kid]),
        ",".join([t, sig]),
        ",".join([kid, sig]),
        header.replace(",", ", "),
        header.replace(",", ";"),
        " " + header,
        header + " ",
        header.replace("t=", "T="),
        header.replace("t=", "t:"),
        header.replace(f"t={NOW}", f"t=0{NOW}"),
        header.replace(f"t={NOW}", f"t=+{NOW}"),
        header.replace(f"t={NOW}", f"t={NOW}.0"),
        header.replace(f"t={NOW}", f"t= {NOW}"),
        header.replace(f"t={NOW}", "t=\u0661\u0662"),  # non-ASCII digits
        header.replace(f"t={NOW}", "t="),
        header.replace(f"t={NOW}", "t=1" + "0" * 40),
        header.replace(f"t={NOW}", "t=-1"),
        header.replace("kid=", "kid=="),
        header.replace(kid, "kid="),
        header + "\u00e9",
        header * 20,
    ]:
        assert verify_signature(malformed, BODY, keys, now=NOW) is False, malformed
    assert verify_signature(None, BODY, keys, now=NOW) is False  # type: ignore[arg-type]
    assert verify_signature(header.encode(), BODY, keys, now=NOW) is False  # type: ignore[arg-type]


def test_a_malformed_key_set_fails_without_raising() -> None:
    key = _key(13)
    header = key.signature_header(BODY, NOW)
    good = key.public_jwk()
    for key_set in [
        None,
        [],
        "keys",
        {},
        {"keys": None},
        {"keys": "abc"},
        {"keys": b"abc"},
        {"keys": {"kid": key.kid}},
        {"keys": [None, 1, "x"]},
        {"keys": [{**good, "kty": "EC"}]},
        {"keys": [{**good, "crv": "Ed448"}]},
        {"keys": [{**good, "alg": "RS256"}]},
        {"keys": [{**good, "use": "enc"}]},
        {"keys": [{key_name: v for key_name, v in good.items() if key_name != "x"}]},
        {"keys": [{**good, "x": None}]},
        {"keys": [{**good, "x": good["x"][:-2]}]},
        {"keys": [{**good, "x": good["x"] + "AA"}]},
        {"keys": [{**good, "x": good["x"] + "="}]},
        {"keys": [{**good, "x": "!" * 43}]},
        {"keys": [good, good]},  # a kid must name one key
        {"keys": [{**good, "kid": None}]},
    ]:
        assert verify_signature(header, BODY, key_set, now=NOW) is False, key_set  # type: ignore[arg-type]


def test_a_key_set_without_the_optional_members_verifies() -> None:
    key = _key(14)
    minimal = {k: v for k, v in key.public_jwk().items() if k in {"kty", "crv", "kid", "x"}}
    header = key.signature_header(BODY, NOW)
    assert verify_signature(header, BODY, {"keys": [minimal]}, now=NOW)
    assert verify_signature(header, BODY, {"keys": (minimal,)}, now=NOW)


def test_verification_never_raises() -> None:
    rng = random.Random(99)
    key = _key(15)
    keys = jwks([key])
    header = key.signature_header(BODY, NOW)
    alphabet = "t=kid,ed25519ds_AZaz09-_.=+/ \u00e9\x00"
    for _ in range(3000):
        choice = rng.random()
        if choice < 0.4:
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 120)))
        elif choice < 0.7:
            text = bytes(rng.randrange(256) for _ in range(rng.randint(0, 200))).decode("latin-1")
        else:
            cut = rng.randrange(len(header))
            text = header[:cut] + rng.choice(alphabet) + header[cut + rng.randint(0, 3) :]
        assert verify_signature(text, BODY, keys, now=NOW) is False or text == header
