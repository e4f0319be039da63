"""Read parameters must be spelled literally: a cache keys on the raw name."""

from __future__ import annotations

import pytest

from durable_streams_aws.core.cdn.policy import KEY_QUERY_PARAMETERS
from durable_streams_aws.core.protocol.errors import ProtocolError
from durable_streams_aws.core.protocol.query import READ_PARAMETERS, check_parameter_names


@pytest.mark.parametrize(
    "query",
    [
        b"",
        b"offset=-1",
        b"offset=%2D1&live=long-poll&cursor=12",  # encoded values are fine: keyed as sent
        b"live=sse&offset=now",
        b"Offset=5",  # not a read parameter to the server either
        b"other=%6Fffset",
        b"%ff=1",
        b"%E6%97%A5=1&offset=0",
        b"offset",
        b"&&offset=1&",
        b"colo%72=x",  # not a key parameter: any spelling
        b"cursor%3D=1",  # decodes to "cursor=", another name
        b"live%00=sse",  # decodes to "live\x00"
    ],
)
def test_literal_names_pass(query: bytes) -> None:
    check_parameter_names(query, KEY_QUERY_PARAMETERS)


@pytest.mark.parametrize(
    "query",
    [
        b"%6Fffset=5",
        b"offset=1&%6Cive=long-poll",
        b"%63ursor=1",
        b"%6fffset=5",
        b"of%66set=5",
        b"liv%65=sse",
        b"sig%6Eature=x",
        b"%65xpires=1",
        b"%73cope=a",
        b"%6Bid=a",
        b"%70refix=a",
    ],
)
def test_other_spellings_of_a_key_parameter_are_refused(query: bytes) -> None:
    with pytest.raises(ProtocolError) as refused:
        check_parameter_names(query, KEY_QUERY_PARAMETERS)
    assert refused.value.status == 400


@pytest.mark.parametrize("name", KEY_QUERY_PARAMETERS)
def test_percent_spellings_of_every_key_parameter_are_refused(name: str) -> None:
    assert set(READ_PARAMETERS) < set(KEY_QUERY_PARAMETERS)
    encoded = "".join(f"%{ord(c):02X}" for c in name).encode()
    with pytest.raises(ProtocolError):
        check_parameter_names(encoded + b"=1", KEY_QUERY_PARAMETERS)
