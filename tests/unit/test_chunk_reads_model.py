"""`ChunkStore.read` over random stored states, against the stream it stores: byte and JSON
streams, void ranges, history sealed into segments of several page sizes up to the stream
item's hint (and sometimes grown past it), chunks a segment replaced still in the table or
deleted, a grown segment with or without the smaller ones it replaced, and instances that
remember any part of it (segments, chunks, a cache too small or none). DynamoDB and S3 are
in-memory stand-ins that answer the store's Query and GetObject as the services do.

Every read is the stream's data and nothing else: its bytes (its messages) between where it
starts and where it ends, no void range inside, at least one unit read unless at the tail,
and started where asked (or at the start of the unit asked inside, with `whole`, or past void
ranges). Once the sealer's work is settled, every instance reads every batch alike (its
start, end and data), whatever it remembers: the same batches from every Lambda instance."""

from __future__ import annotations

import io
import random
from dataclasses import dataclass
from typing import Any

from durable_streams_aws.core.storage import _items as items
from durable_streams_aws.core.storage import _segments as layout
from durable_streams_aws.core.storage._chunk_layout import decode_chunk
from durable_streams_aws.core.storage._chunks import ChunkStore
from durable_streams_aws.core.storage.model import ReadBatch, StreamInfo

INLINE = 40
PARTITION = items.chunk_partition("i")


class Table:
    """DynamoDB's Query on one partition, by sort key, paged by `Limit`; it refuses a BETWEEN
    whose bounds are the wrong way round, as DynamoDB does."""

    def __init__(self, stored: dict[str, dict[str, Any]]) -> None:
        self.stored = stored  # sort key -> item

    def query(self, **request: Any) -> dict[str, Any]:
        values = request["ExpressionAttributeValues"]
        assert values[":pk"]["S"] == PARTITION
        if "BETWEEN" in request["KeyConditionExpression"]:
            first, last = values[":first"]["S"], values[":last"]["S"]
            assert first <= last, f"DynamoDB refuses BETWEEN {first} AND {last}"
            keys = [k for k in sorted(self.stored) if first <= k <= last]
        else:
            keys = [k for k in sorted(self.stored) if k > values[":after"]["S"]]
        if "ExclusiveStartKey" in request:
            keys = [k for k in keys if k > request["ExclusiveStartKey"]["sk"]["S"]]
        limit = request.get("Limit")
        page = keys if limit is None else keys[:limit]
        answer: dict[str, Any] = {"Items": [self.stored[k] for k in page]}
        if limit is not None and len(keys) > limit:
            answer["LastEvaluatedKey"] = {"pk": values[":pk"], "sk": {"S": page[-1]}}
        return answer


class Bucket:
    """S3's GetObject, ranged or whole."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        self.objects = objects

    def get_object(self, Bucket: str, Key: str, Range: str | None = None) -> dict[str, Any]:
        data = self.objects[Key]
        if Range:
            first, last = Range.removeprefix("bytes=").split("-")
            data = data[int(first) : int(last) + 1]
        return {"Body": io.BytesIO(data)}


@dataclass(frozen=True)
class Append:
    start: int
    data: bytes | None  # None: a void range of `size`
    lengths: tuple[int, ...]
    size: int

    @property
    def end(self) -> int:
        return self.start + self.size


@dataclass
class Stored:
    json_mode: bool
    appends: list[Append]
    tail: int
    hint: int
    # The sealer's work done: sealed once, up to the hint, the chunks it replaced deleted.
    # Before (chunks it replaced still in the table, two segments made one, a segment past
    # the hint), instances that know different items of the same positions may cut batches
    # at different boundaries, as they always could.
    settled: bool
    table: dict[str, dict[str, Any]]
    objects: dict[str, bytes]
    segments: list[dict[str, Any]]
    chunks: list[dict[str, Any]]


def chunk_item(append: Append, json_mode: bool, objects: dict[str, bytes]) -> dict[str, Any]:
    item = {**items.chunk_key("i", append.end), "st": items.n(append.start)}
    if append.data is None:
        return {**item, "v": {"BOOL": True}}
    if append.size <= INLINE:
        item["b"] = {"B": append.data}
    else:
        key = f"data/i/c{append.start}"
        objects[key] = append.data
        item["k"] = items.s(key)
    if json_mode:
        item["ml"] = {"B": items.pack_lengths(append.lengths)}
    return item


def segment_item(
    run: list[Append], json_mode: bool, objects: dict[str, bytes], page_bytes: int
) -> dict[str, Any]:
    pieces = [layout.Piece(a.data or b"", a.lengths) for a in run]
    body = layout.build(run[0].start, pieces, json_mode, page_bytes)
    key = f"data/i/s{run[0].start}-{run[-1].end}"
    objects[key] = body.body
    return {
        **items.chunk_key("i", run[-1].end),
        "st": items.n(run[0].start),
        "k": items.s(key),
        "pg": {"B": body.directory},
    }


def appends_of(rng: random.Random, json_mode: bool) -> list[Append]:
    appends: list[Append] = []
    position = 0
    for _ in range(rng.randrange(3, 30)):
        if appends and rng.random() < 0.1:
            size = rng.randrange(1, 20)
            appends.append(Append(position, None, (), size))
        elif json_mode:
            messages = [bytes([97 + rng.randrange(26)]) * rng.randrange(1, 25) for _ in range(3)]
            messages = messages[: rng.randrange(1, 4)]
            data = b"".join(messages)
            appends.append(Append(position, data, tuple(map(len, messages)), len(data)))
        else:
            data = rng.randbytes(rng.randrange(1, 60))
            appends.append(Append(position, data, (len(data),), len(data)))
        position = appends[-1].end
    return appends


def stored_state(rng: random.Random) -> Stored:
    json_mode = rng.random() < 0.5
    appends = appends_of(rng, json_mode)
    tail = appends[-1].end
    objects: dict[str, bytes] = {}
    table = {}
    chunks = []
    for append in appends:
        item = chunk_item(append, json_mode, objects)
        table[item["sk"]["S"]] = item
        chunks.append(item)
    bounds = [a.start for a in appends] + [tail]
    hint = rng.choice(bounds) if rng.random() < 0.85 else 0
    sealed_to = rng.choice([b for b in bounds if b >= hint]) if rng.random() < 0.3 else hint
    page_bytes = rng.choice([10, 30, 80, 1000])
    # Sealed: runs of appends (never across a void) up to `sealed_to`, cut into segments.
    segments: list[tuple[dict[str, Any], list[Append]]] = []
    run: list[Append] = []
    for append in [a for a in appends if a.end <= sealed_to] + [Append(tail, None, (), 0)]:
        if append.data is not None:
            run.append(append)
            continue
        while run:
            count = rng.randrange(1, 6)
            taken, run = run[:count], run[count:]
            segments.append((segment_item(taken, json_mode, objects, page_bytes), taken))
    leftovers = False
    for item, taken in segments:
        table[item["sk"]["S"]] = item
        for append in taken:  # the chunks it replaced: deleted, or not yet
            key = items.chunk_sort_key(append.end)
            if table[key] is not item:
                if rng.random() < 0.6:
                    del table[key]
                else:
                    leftovers = True
    merged = False
    if len(segments) >= 2 and rng.random() < 0.4:  # sealed again, two segments made one
        index = rng.randrange(len(segments) - 1)
        (first, lower), (_, upper) = segments[index], segments[index + 1]
        if lower[-1].end == upper[0].start:
            grown = segment_item(lower + upper, json_mode, objects, page_bytes)
            table[grown["sk"]["S"]] = grown
            if rng.random() < 0.6:
                del table[first["sk"]["S"]]
            segments.append((grown, lower + upper))
            merged = True
    items_sealed = [item for item, _ in segments]
    grown = any(decode_chunk(item).end > hint for item in items_sealed)
    settled = not (leftovers or merged or grown)
    return Stored(json_mode, appends, tail, hint, settled, table, objects, items_sealed, chunks)


def instance(stored: Stored, rng: random.Random | None) -> ChunkStore:
    """A store on the stand-ins remembering a random part of what is stored (None: nothing)."""
    cache_bytes = 0 if rng is None else rng.choice([0, 1000, 1 << 20])
    store = ChunkStore(Table(stored.table), Bucket(stored.objects), "t", "b", INLINE, cache_bytes)
    if rng is not None:
        for item in stored.segments:
            if rng.random() < 0.4:
                store.segments.remember("i", decode_chunk(item))
        share = rng.choice([0.2, 0.7, 1.0])
        store.recent.remember("i", [decode_chunk(c) for c in stored.chunks if rng.random() < share])
    return store


def message_boundaries(stored: Stored) -> set[int]:
    """Where each message (each append, each void range) starts and ends."""
    found = set()
    for append in stored.appends:
        at = append.start
        found.add(at)
        for length in append.lengths:
            at += length
            found.add(at)
        found.add(append.end)
    return found


def check(stored: Stored, batch: ReadBatch, start: int, whole: bool) -> None:
    voids = [a for a in stored.appends if a.data is None]
    assert all(not (batch.start < v.end and v.start < batch.end) for v in voids), batch
    # At least one unit read, unless nothing is stored past the start (`whole` reads from
    # the start of the unit asked inside, and may end before the position asked for).
    assert (
        batch.end > (batch.start if whole else start)
        or start == stored.tail
        or all(a.data is None for a in stored.appends if a.end > start)
    )
    if batch.start != start:
        skipped = [a for a in stored.appends if batch.start < a.end and a.start < start]
        passed_over = [a for a in stored.appends if start <= a.start < batch.start]
        assert (whole and batch.start < start and all(a.data for a in skipped)) or (
            batch.start > start and all(a.data is None for a in passed_over)
        ), (start, batch)
    if stored.json_mode:
        messages = []
        for append in stored.appends:
            at = append.start
            for length in append.lengths:
                if batch.start <= at and at + length <= batch.end:
                    messages.append(
                        (append.data or b"")[at - append.start : at - append.start + length]
                    )
                at += length
        assert list(batch.messages or ()) == messages, (start, batch)
    else:
        data = b"".join(
            a.data[max(batch.start - a.start, 0) : batch.end - a.start]
            for a in stored.appends
            if a.data is not None and a.start < batch.end and batch.start < a.end
        )
        assert batch.data == data, (start, batch)


def test_every_read_is_the_streams_data_and_alike_on_every_instance() -> None:
    for seed in range(600):
        rng = random.Random(seed)
        stored = stored_state(rng)
        content_type = "application/json" if stored.json_mode else "application/octet-stream"
        info = StreamInfo(
            "p", "i", content_type, stored.tail, False, None, None, None, None, 0.0, 0.0,
            sealed=stored.hint,
        )  # fmt: skip
        instances = [instance(stored, None)] + [instance(stored, rng) for _ in range(3)]
        boundaries = message_boundaries(stored)
        starts = {0, stored.tail, *(rng.randrange(stored.tail + 1) for _ in range(6))}
        starts |= set(rng.sample(sorted(boundaries), min(4, len(boundaries))))
        for start in sorted(starts):
            for budget in (1, 2, 17, 60, 1000):
                for whole in (False, True):
                    if stored.json_mode and not whole and start not in boundaries:
                        continue  # a JSON read starts where a message does, or snaps to one
                    batches = [store.read(info, start, budget, whole) for store in instances]
                    for batch in batches:
                        check(stored, batch, start, whole)
                    if stored.settled:
                        read = [(b.start, b.end, b.data, b.messages) for b in batches]
                        assert read == read[:1] * len(read), (seed, start, budget)
