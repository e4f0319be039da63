"""Per-request work moto repeats although its answer never changes, done once, for the
embedded emulator.

For every request moto lists its own package directory to recognise service names
(`list_of_moto_modules`), walks the handler class with `inspect.getmembers` to find the action's
method (`method_names_from_class`), and draws a 52-character request id one character at a
time from a seeded generator. Together that was about a millisecond of each request here. The
first two are remembered; the request id comes from `os.urandom`, and stays 52 characters of
letters and digits.
"""

from __future__ import annotations

import base64
import itertools
import os
from collections.abc import Iterable
from functools import cache
from typing import Any

from moto import backends
from moto.core import responses
from moto.utilities import aws_headers

_moto_modules = backends.list_of_moto_modules
_moto_method_names = responses.method_names_from_class
_moto_request_id = aws_headers.gen_amzn_requestid_long


@cache
def _modules() -> tuple[str, ...]:
    return tuple(_moto_modules())


def list_of_moto_modules() -> Iterable[str]:
    return _modules()


@cache
def method_names_from_class(clazz: object) -> list[str]:
    return _moto_method_names(clazz)


_REQUEST_ID_PREFIX = base64.b32encode(os.urandom(20)).decode("ascii")[:32]
_REQUEST_NUMBERS = itertools.count()


def gen_amzn_requestid_long(headerdict: dict[str, Any] | None = None) -> str:
    """A request id of moto's shape (52 characters) without a system call per request:
    nothing reads it but a client's logs."""
    request_id = f"{_REQUEST_ID_PREFIX}{next(_REQUEST_NUMBERS):020d}"
    if isinstance(headerdict, dict):
        headerdict["x-amzn-requestid"] = request_id
    return request_id


def install() -> None:
    backends.list_of_moto_modules = list_of_moto_modules  # type: ignore[assignment]
    responses.method_names_from_class = method_names_from_class  # type: ignore[assignment]
    responses.gen_amzn_requestid_long = gen_amzn_requestid_long
    aws_headers.gen_amzn_requestid_long = gen_amzn_requestid_long


def uninstall() -> None:
    backends.list_of_moto_modules = _moto_modules
    responses.method_names_from_class = _moto_method_names
    responses.gen_amzn_requestid_long = _moto_request_id
    aws_headers.gen_amzn_requestid_long = _moto_request_id
