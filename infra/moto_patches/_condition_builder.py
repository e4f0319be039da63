"""Condition expressions of the store's simple forms, built into moto's own condition objects
without moto's parser, for the embedded emulator's fast item requests.

moto's parser costs about 0.2 ms a condition here, and its parse cannot be reused between
appends: the parsed condition holds the request's values, and an append's values (the tail,
the clock) are new every time. The store's conditions are comparisons of an attribute with a
value, `attribute_exists` and `attribute_not_exists`, joined by AND, OR, NOT and parentheses.
Their shape is parsed once per expression text; each request then builds moto's `OpAnd`,
`OpEqual`, `AttributePath`, `AttributeValue`... from it, so evaluating one is moto's own code.
Any other form (another function, BETWEEN, IN, a nested path, a reserved word used as a name,
a syntax error, anything moto's parser makes differently) is left to moto's parser: `build`
answers None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from moto.dynamodb.comparisons import (
    COMPARATOR_CLASS,
    AttributePath,
    AttributeValue,
    FuncAttrExists,
    FuncAttrNotExists,
    OpAnd,
    OpNot,
    OpOr,
    get_filter_expression,
)
from moto.dynamodb.parsing.reserved_keywords import ReservedKeywords

_TOKEN = re.compile(
    r"\s*(?:(?P<name>#[A-Za-z0-9_]+)|(?P<value>:[A-Za-z0-9_]+)|(?P<word>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<comparator><>|<=|>=|[=<>])|(?P<paren>[()]))"
)
_FUNCTIONS = {"attribute_exists": FuncAttrExists, "attribute_not_exists": FuncAttrNotExists}
_KEYWORDS = {"and", "or", "not"}


@dataclass(frozen=True)
class _Operand:
    text: str  # "#name", ":value" or a plain attribute name

    @property
    def is_value(self) -> bool:
        return self.text.startswith(":")

    def build(self, names: dict[str, str], values: dict[str, Any]) -> Any:
        if self.is_value:
            return AttributeValue(values[self.text])
        return AttributePath([names[self.text] if self.text.startswith("#") else self.text])


# A parsed shape: ("or" | "and", left, right), ("not", inner), ("function", name, operand) or
# ("compare", comparator, left operand, right operand).
Shape = tuple[Any, ...]


class _Unsupported(Exception):
    """Outside the forms built here: moto's parser decides."""


class _Parser:
    def __init__(self, expression: str) -> None:
        self.tokens: list[tuple[str, str]] = []
        position = 0
        stripped = expression.rstrip()
        while position < len(stripped):
            match = _TOKEN.match(stripped, position)
            if match is None or match.end() == position:
                raise _Unsupported
            kind = match.lastgroup
            assert kind is not None
            self.tokens.append((kind, match.group(kind)))
            position = match.end()
        self.position = 0

    def parse(self) -> Shape:
        shape = self._or()
        if self.position != len(self.tokens):
            raise _Unsupported
        return shape

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def _take(self, kind: str, text: str | None = None) -> str:
        token = self._peek()
        if token is None or token[0] != kind or (text is not None and token[1] != text):
            raise _Unsupported
        self.position += 1
        return token[1]

    def _keyword(self, word: str) -> bool:
        token = self._peek()
        if token is not None and token[0] == "word" and token[1].lower() == word:
            self.position += 1
            return True
        return False

    def _or(self) -> Shape:
        shape = self._and()
        while self._keyword("or"):
            shape = ("or", shape, self._and())
        return shape

    def _and(self) -> Shape:
        shape = self._not()
        while self._keyword("and"):
            shape = ("and", shape, self._not())
        return shape

    def _not(self) -> Shape:
        if self._keyword("not"):
            return ("not", self._not())
        return self._term()

    def _term(self) -> Shape:
        token = self._peek()
        if token == ("paren", "("):
            self.position += 1
            shape = self._or()
            self._take("paren", ")")
            return shape
        if token is not None and token[0] == "word" and token[1] in _FUNCTIONS:
            self.position += 1
            self._take("paren", "(")
            operand = self._operand()
            self._take("paren", ")")
            if operand.is_value:
                raise _Unsupported
            return ("function", token[1], operand)
        left = self._operand()
        comparator = self._take("comparator")
        right = self._operand()
        if left.is_value and right.is_value:
            raise _Unsupported
        return ("compare", comparator, left, right)

    def _operand(self) -> _Operand:
        token = self._peek()
        if token is None or token[0] not in ("name", "value", "word"):
            raise _Unsupported
        kind, text = token
        if kind == "word" and (
            text.lower() in _KEYWORDS
            or text in _FUNCTIONS
            or text.upper() in ReservedKeywords.get_reserved_keywords()
        ):
            raise _Unsupported
        self.position += 1
        return _Operand(text)


@lru_cache(maxsize=512)
def _shape(expression: str) -> Shape | None:
    try:
        return _Parser(expression).parse()
    except _Unsupported:
        return None


# Whether moto's parser made the same condition as `_build` for an expression, its names and
# the types of its values.
_agreed: dict[tuple[str, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]], bool] = {}
_AGREED_KEPT = 512


def build(expression: str, names: dict[str, str], values: dict[str, Any]) -> Any:
    """moto's condition object for `expression`, or None when moto's parser must make it.
    Every placeholder must be defined (the caller checks).

    moto's parser also refuses some forms this grammar accepts (redundant parentheses, for
    one), so the first time an expression is met with its names, moto's parser makes it
    too: only if it makes the same condition is the expression built here from then on (for
    those names and types of values)."""
    shape = _shape(expression)
    if shape is None:
        return None
    types = tuple(sorted((placeholder, next(iter(value))) for placeholder, value in values.items()))
    key = (expression, tuple(sorted(names.items())), types)
    agreed = _agreed.get(key)
    if agreed is False:
        return None
    built = _build(shape, names, values)
    if agreed is None:
        try:
            agreed = repr(get_filter_expression(expression, names, values)) == repr(built)
        except Exception:
            agreed = False
        if len(_agreed) >= _AGREED_KEPT:
            _agreed.clear()
        _agreed[key] = agreed
    return built if agreed else None


def _build(shape: Shape, names: dict[str, str], values: dict[str, Any]) -> Any:
    kind = shape[0]
    if kind == "or":
        return OpOr(_build(shape[1], names, values), _build(shape[2], names, values))
    if kind == "and":
        return OpAnd(_build(shape[1], names, values), _build(shape[2], names, values))
    if kind == "not":
        return OpNot(_build(shape[1], names, values))
    if kind == "function":
        return _FUNCTIONS[shape[1]](shape[2].build(names, values))
    _, comparator, left, right = shape
    return COMPARATOR_CLASS[comparator](left.build(names, values), right.build(names, values))
