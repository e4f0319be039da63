"""Condition expressions parsed once, for the embedded emulator.

moto lexes and parses a condition expression with regular expressions every time it meets one,
and it meets each one twice per write: once to check the request, once to evaluate it. The
store sends the same few expressions over and over, so the lexing is kept per expression text,
and a whole parse per (expression, names, values): the parsed condition is only ever evaluated,
never changed, so sharing it is safe.
"""

from __future__ import annotations

import copy
import json
from collections import OrderedDict, deque
from functools import lru_cache
from typing import Any

from moto.dynamodb.comparisons import ConditionExpressionParser

_moto_parse = ConditionExpressionParser.parse
_moto_lex = ConditionExpressionParser._lex_condition_expression
_PARSED_KEPT = 512

Node = ConditionExpressionParser.Node


@lru_cache(maxsize=_PARSED_KEPT)
def _lexed(expression: str) -> tuple[Node, ...]:
    return tuple(_moto_lex(ConditionExpressionParser(expression, {}, {})))


def _lex(self: ConditionExpressionParser) -> deque[Node]:
    # Fresh child lists: the parser's later stages must not share them between parses.
    return deque(
        Node(node.nonterminal, node.kind, node.text, node.value, list(node.children))
        for node in _lexed(self.condition_expression)
    )


_parsed: OrderedDict[tuple[str, str, str], tuple[Any, list[Any], list[Any]]] = OrderedDict()


def _parse(self: ConditionExpressionParser) -> Any:
    if not self.condition_expression:
        return _moto_parse(self)
    key = (
        self.condition_expression,
        json.dumps(self.expression_attribute_names, sort_keys=True),
        json.dumps(self.expression_attribute_values, sort_keys=True, default=repr),
    )
    known = _parsed.get(key)
    if known is None:
        names_before = len(self.expr_attr_names_found)
        values_before = len(self.expr_attr_values_found)
        # Parsed from copies of the values: moto's parsed condition keeps references to them,
        # and the request's own values may end up in a stored item that later changes.
        shared_values = self.expression_attribute_values
        self.expression_attribute_values = copy.deepcopy(shared_values)
        try:
            condition = _moto_parse(self)
        finally:
            self.expression_attribute_values = shared_values
        known = (
            condition,
            self.expr_attr_names_found[names_before:],
            self.expr_attr_values_found[values_before:],
        )
        _parsed[key] = known
        if len(_parsed) > _PARSED_KEPT:
            _parsed.popitem(last=False)
        return condition
    _parsed.move_to_end(key)
    condition, names, values = known
    self.expr_attr_names_found.extend(names)
    self.expr_attr_values_found.extend(values)
    return condition


def install() -> None:
    ConditionExpressionParser._lex_condition_expression = _lex  # type: ignore[method-assign]
    ConditionExpressionParser.parse = _parse  # type: ignore[method-assign]


def uninstall() -> None:
    ConditionExpressionParser._lex_condition_expression = _moto_lex  # type: ignore[method-assign]
    ConditionExpressionParser.parse = _moto_parse  # type: ignore[method-assign]
