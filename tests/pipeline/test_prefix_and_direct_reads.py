"""Batch reads of every stream under a prefix, over HTTP and straight from the store: the same
rows either way (forks included), ranges split at chunk boundaries into more partitions, and
JSON messages parsed into a schema."""

from __future__ import annotations

import json
from typing import Any

import pytest
from spark_support import Served

from durable_streams_aws.client import DurableStream
from durable_streams_aws.core.protocol.offsets import format_offset, parse_offset
from durable_streams_aws.pipeline._access import StorageAccess
from durable_streams_aws.pipeline._plan import BEGINNING, Origin, StreamSlice

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def load(spark: Any, options: dict[str, str]) -> Any:
    reader = spark.read.format("durable_streams")
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def table(frame: Any) -> list[tuple]:
    return sorted((r.stream, r.offset, r.message, r.content_type) for r in frame.collect())


@pytest.fixture(scope="module")
def shop(served: Served) -> dict[str, list[Any]]:
    """Streams under shop/ (one a fork), and one elsewhere: stream -> its messages."""
    written: dict[str, list[Any]] = {}
    for name, count in (("shop/orders", 120), ("shop/refunds", 7), ("elsewhere", 3)):
        with DurableStream(f"{served.url}/{name}") as stream:
            stream.create("application/json")
            values = [{"id": n, "stream": name, "pad": "x" * (n % 50)} for n in range(count)]
            for start in range(0, count, 10):  # an append (a stored chunk) per ten messages
                stream.append(values[start : start + 10])
        written[name] = values
    with DurableStream(f"{served.url}/shop/orders-copy") as fork:
        fork.fork("/v1/stream/shop/orders")
        fork.append([{"id": 1000, "stream": "copy", "pad": ""}])
    written["shop/orders-copy"] = [
        *written["shop/orders"],
        {"id": 1000, "stream": "copy", "pad": ""},
    ]
    return written


def test_a_prefix_reads_the_same_over_http_and_from_the_store(
    spark: Any, served: Served, shop: dict[str, list[Any]]
) -> None:
    over_http = table(load(spark, {"url": served.url, "prefix": "shop/"}))
    direct = table(load(spark, {**served.store_options, "prefix": "shop/"}))
    assert over_http == direct
    found: dict[str, list[Any]] = {}
    for stream, _, message, _ in over_http:
        found.setdefault(stream, []).append(json.loads(message))
    expected = {name: values for name, values in shop.items() if name.startswith("shop/")}
    assert {k: sorted(v, key=lambda m: m["id"]) for k, v in found.items()} == expected


def test_direct_reads_split_long_ranges_at_chunk_boundaries(
    spark: Any, served: Served, shop: dict[str, list[Any]]
) -> None:
    whole = load(spark, {**served.store_options, "stream": "shop/orders"})
    split = load(
        spark, {**served.store_options, "stream": "shop/orders", "bytesPerPartition": "1000"}
    )
    assert whole.rdd.getNumPartitions() == 1
    assert split.rdd.getNumPartitions() >= 5
    assert table(split) == table(whole)
    assert [json.loads(r.message) for r in split.orderBy("offset").collect()] == shop["shop/orders"]


@pytest.mark.parametrize("to_the_tail", [True, False])
def test_a_direct_read_takes_a_json_range_in_one_read_and_nothing_past_it(
    served: Served, shop: dict[str, list[Any]], monkeypatch: pytest.MonkeyPatch, to_the_tail: bool
) -> None:
    """A JSON read's budget counts a separator a message: a range read with only its own
    length as the budget stopped short, and took several reads of the store to finish. The
    room is not spent past the range's end either (a split piece ends before the tail)."""
    origin = Origin(table=served.table, bucket=served.bucket, endpoint=served.endpoint)
    reader = StorageAccess(origin)
    ends: list[int] = []
    read = reader.store.read

    def counted(info: Any, at: int, most: int, whole: bool = False) -> Any:
        batch = read(info, at, most, whole)
        ends.append(batch.end)
        return batch

    state = reader.state("shop/orders")
    assert state is not None
    end = state.tail
    if not to_the_tail:
        info = reader.store.get("shop/orders")
        assert info is not None
        end = format_offset(list(reader.store.boundaries(info, 0, info.tail))[5])
    monkeypatch.setattr(reader.store, "read", counted)
    piece = StreamSlice("shop/orders", BEGINNING, end, state.content_type)
    batches = list(reader.read(piece))
    assert len(ends) == 1 and len(batches) == 1
    assert ends == [parse_offset(end).at]  # the store's read itself ends there
    expected = shop["shop/orders"] if to_the_tail else shop["shop/orders"][:60]
    assert [json.loads(message) for message in batches[0].messages] == expected


def test_json_messages_parse_into_a_schema(
    spark: Any, served: Served, shop: dict[str, list[Any]]
) -> None:
    frame = load(
        spark,
        {
            "url": served.url,
            "stream": "shop/refunds",
            "jsonSchema": "id INT, pad STRING, missing BOOLEAN",
        },
    )
    assert frame.schema["value"].dataType.simpleString() == (
        "struct<id:int,pad:string,missing:boolean>"
    )
    values = [row.value.asDict() for row in frame.orderBy("offset").collect()]
    assert values == [
        {"id": m["id"], "pad": m["pad"], "missing": None} for m in shop["shop/refunds"]
    ]
    assert frame.where("value.id >= 5").count() == 2
