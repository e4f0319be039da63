"""The streams' table as other packages see it. The subscription store keeps its items in the
same table as the streams (`core.subscriptions.store`) and reads stream items beside them; the
keys and attribute encodings they share are the storage layer's (`_items`), and these are the
ones another package may use."""

from ._items import (
    STREAM_PREFIX,
    SUBSCRIPTION_LINK_PREFIX,
    SUBSCRIPTION_PARTITION,
    Item,
    decode_stream,
    n,
    s,
    stream_key,
)

__all__ = [
    "STREAM_PREFIX",
    "SUBSCRIPTION_LINK_PREFIX",
    "SUBSCRIPTION_PARTITION",
    "Item",
    "decode_stream",
    "n",
    "s",
    "stream_key",
]
