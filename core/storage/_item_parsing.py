"""DynamoDB's item responses parsed into exactly what botocore makes of them, faster.

botocore parses a response by walking the operation's output shape: for every attribute of
every item, a map entry, a tagged-union structure and a scalar, each through a lookup of its
handler by name. A catch-up read of history written in 1 KiB appends is a thousand items per
megabyte, and that walk was about 40% of the read's time in this process. The attributes of
the store's items are strings, numbers and binary values at the top level; those are built
here directly (the binary ones decoded by botocore's own blob parser), and every other value
(maps, lists, sets, anything botocore might add) is left to botocore's walk, as is every
other shape. `tests/unit/test_item_parsing.py` parses the same bodies both ways.
"""

from __future__ import annotations

from typing import Any

from botocore.parsers import PROTOCOL_PARSERS, JSONParser, ResponseParserFactory

# The shape of an item, a map of attribute names to values, in DynamoDB's model.
_ITEM_SHAPE = "AttributeMap"
_VALUE_SHAPE = "AttributeValue"


class ItemJSONParser(JSONParser):
    """botocore's JSON protocol parser, with items' top-level scalar attributes built
    directly."""

    def _handle_map(self, shape: Any, value: Any) -> Any:
        if shape.name != _ITEM_SHAPE or shape.value.name != _VALUE_SHAPE:
            return super()._handle_map(shape, value)
        value_shape = shape.value
        parsed = {}
        for name, attribute in value.items():
            scalar = self._scalar(attribute)
            if scalar is None:
                scalar = self._parse_shape(value_shape, attribute)
            parsed[name] = scalar
        return parsed

    def _scalar(self, attribute: Any) -> dict[str, Any] | None:
        """A string, number or binary value as botocore parses it; None for anything else."""
        if type(attribute) is not dict or len(attribute) != 1:
            return None
        ((kind, inner),) = attribute.items()
        if type(inner) is not str:
            return None
        if kind == "S" or kind == "N":
            return {kind: inner}
        if kind == "B":
            return {kind: self._blob_parser(inner)}
        return None


class ItemParserFactory(ResponseParserFactory):
    """botocore's parser factory, giving `ItemJSONParser` for the JSON protocol (DynamoDB's)."""

    def create_parser(self, protocol_name: str) -> Any:
        if PROTOCOL_PARSERS.get(protocol_name) is JSONParser:
            return ItemJSONParser(**self._defaults)
        return super().create_parser(protocol_name)
