"""The DynamoDB item layout: keys, and conversion between items and model values.

One table holds everything:
  s#<path> / meta          the stream: incarnation, tail, closure, TTL, fork origin, ref count
  s#<path> / p#<producer>  one producer's epoch and last seq (valid for one incarnation)
  d#<inc>  / c#<end>       one committed chunk of an incarnation, keyed by its end position,
                           or a void one (a reserved range that holds nothing), or a sealed
                           segment (an S3 object and its page directory) that replaced the
                           chunks of [start, end)
  k#<inc>  / <n>           the claim of reserved range n: filled or void (core/storage/_ranges)
  gc#<n>   / <inc>         an incarnation whose data nobody can read any more
  sq#<n>   / <digest>      a stream with history to seal (its path, incarnation, tail)
  rq#<n>   / <digest>      a stream with a retention policy (its path, incarnation)
  d#<inc>  / a#<at>        the snapshot a compaction folded the history below <at> into
  sub#     / <id>          a subscription (core/subscriptions/store.py)
  sl#<inc> / <path>        a stream linked to incarnation <inc> of a subscription
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import struct
import zlib
from typing import Any

from ..protocol.headers import ProducerClaim
from ..protocol.limits import DYNAMODB_PARTITION_KEY_BYTES, DYNAMODB_SORT_KEY_BYTES, utf8_length
from ..protocol.producer import ProducerState
from .model import PendingCut, Retained, Segment, Snapshot, StreamInfo

Item = dict[str, Any]
META = "meta"
STREAM_PREFIX = "s#"
RETIRE_SHARDS = 16
_POSITION_WIDTH = 16


def s(value: str) -> dict[str, str]:
    return {"S": value}


def n(value: int | float) -> dict[str, str]:
    return {"N": repr(value) if isinstance(value, float) else str(value)}


def _key(partition: str, sort: str) -> Item:
    """A primary key, refused here if DynamoDB would refuse it: the request parsers keep
    paths and producer ids within `core.protocol.limits`, so this never fires in service."""
    if utf8_length(partition) > DYNAMODB_PARTITION_KEY_BYTES:
        raise ValueError(f"partition key over {DYNAMODB_PARTITION_KEY_BYTES} bytes")
    if utf8_length(sort) > DYNAMODB_SORT_KEY_BYTES:
        raise ValueError(f"sort key over {DYNAMODB_SORT_KEY_BYTES} bytes")
    return {"pk": s(partition), "sk": s(sort)}


def stream_key(path: str) -> Item:
    return _key(STREAM_PREFIX + path, META)


PRODUCER_SORT_PREFIX = "p#"


def producer_key(path: str, producer_id: str) -> Item:
    return _key(STREAM_PREFIX + path, PRODUCER_SORT_PREFIX + producer_id)


CHUNK_PREFIX = "d#"
CLAIM_PREFIX = "k#"
RETIRE_PREFIX = "gc#"


def chunk_partition(incarnation: str) -> str:
    return CHUNK_PREFIX + incarnation


def chunk_sort_key(end: int) -> str:
    return f"c#{end:0{_POSITION_WIDTH}d}"


def chunk_key(incarnation: str, end: int) -> Item:
    """The key of the chunk (or sealed segment) of an incarnation that ends at `end`."""
    return {"pk": s(chunk_partition(incarnation)), "sk": s(chunk_sort_key(end))}


def claim_partition(incarnation: str) -> str:
    return CLAIM_PREFIX + incarnation


def range_claim_key(incarnation: str, number: int) -> Item:
    """The claim of range `number`: written by its fill or its voiding, whichever is first
    (`core.storage._ranges`). Claims have a partition of their own: every append writes one,
    and the chunks' partition has write capacity enough for its chunks alone."""
    return {"pk": s(claim_partition(incarnation)), "sk": s(f"{number:0{_POSITION_WIDTH}d}")}


def retire_partition(shard: int) -> str:
    return f"{RETIRE_PREFIX}{shard:02d}"


def retire_key(incarnation: str) -> Item:
    shard = zlib.crc32(incarnation.encode()) % RETIRE_SHARDS
    return _key(retire_partition(shard), incarnation)


SEAL_SHARDS = 16
SEAL_PREFIX = "sq#"


def seal_partition(shard: int) -> str:
    return f"{SEAL_PREFIX}{shard:02d}"


def seal_mark_key(path: str) -> Item:
    """Where a stream is marked for the sealer. The sort key is a digest: a path may be
    longer than a sort key can be."""
    shard = zlib.crc32(path.encode()) % SEAL_SHARDS
    return _key(seal_partition(shard), hashlib.sha256(path.encode()).hexdigest())


def seal_mark_put(table: str, info: StreamInfo, tail: int, marked_at: float) -> Item:
    """A transaction action marking the stream for the sealer (overwriting any mark). `at` is
    the tail the mark covers (the sealer clears a mark only if it still says so); `t` when it
    was written, for the age of the oldest mark waiting (marks written before `t` existed have
    none, and are left out of that age)."""
    return {
        "Put": {
            "TableName": table,
            "Item": {
                **seal_mark_key(info.path),
                "path": s(info.path),
                "inc": s(info.incarnation),
                "at": n(tail),
                "t": n(marked_at),
            },
        }
    }


RETENTION_SHARDS = 16
RETENTION_PREFIX = "rq#"


def retention_partition(shard: int) -> str:
    return f"{RETENTION_PREFIX}{shard:02d}"


def retention_entry_key(path: str) -> Item:
    """Where a stream with a retention policy is listed for the retention runs."""
    shard = zlib.crc32(path.encode()) % RETENTION_SHARDS
    return _key(retention_partition(shard), hashlib.sha256(path.encode()).hexdigest())


def retention_entry_put(table: str, info: StreamInfo) -> Item:
    """A transaction action listing a new stream for the retention runs (overwriting the
    entry of an earlier incarnation of its path)."""
    return {
        "Put": {
            "TableName": table,
            "Item": {
                **retention_entry_key(info.path),
                "path": s(info.path),
                "inc": s(info.incarnation),
            },
        }
    }


def mark_time(item: Item) -> float | None:
    """When a seal mark was written (None: a mark of the layout without the time)."""
    return _num(item, "t")


def _num(item: Item, name: str) -> float | None:
    value = item.get(name)
    return float(value["N"]) if value is not None else None


def _int(item: Item, name: str, default: int = 0) -> int:
    value = item.get(name)
    return int(value["N"]) if value is not None else default


def _str(item: Item, name: str) -> str | None:
    value = item.get(name)
    return value["S"] if value is not None else None


def encode_stream(info: StreamInfo) -> Item:
    item: Item = {
        **stream_key(info.path),
        "inc": s(info.incarnation),
        "ct": s(info.content_type),
        "tail": n(info.tail),
        "closed": {"BOOL": info.closed},
        "acc": n(info.last_access),
        "ctime": n(info.created_at),
        "refs": n(info.ref_count),
        "fpos": n(info.fork_position),
        "rsv": n(info.reserved_end),
        "rn": n(info.ranges),
        "tn": n(info.published_ranges),
        "rt": n(info.reserved_at),
    }
    if info.closed_by is not None:
        item["cb"] = encode_claim(info.closed_by)
    if info.last_stream_seq is not None:
        item["sseq"] = s(info.last_stream_seq)
    if info.ttl_seconds is not None:
        item["ttl"] = n(info.ttl_seconds)
        item["rw"] = n(info.renew_window)
    if info.expires_at is not None:
        item["exp"] = n(info.expires_at)
    if info.soft_deleted:
        item["del"] = {"BOOL": True}
    if info.forked_from is not None:
        item["src"] = s(info.forked_from)
    if info.source_incarnation is not None:
        item["srci"] = s(info.source_incarnation)
    if info.retention is not None:
        item["ret"] = s(info.retention)
    if info.retained != Retained():
        item.update(encode_retained(info.retained))
    if info.inherited:
        item["inh"] = {
            "L": [
                {"M": {"inc": s(seg.incarnation), "s": n(seg.start), "e": n(seg.end)}}
                for seg in info.inherited
            ]
        }
    return item


def decode_stream(path: str, item: Item) -> StreamInfo:
    closed_by = item.get("cb")
    return StreamInfo(
        path=path,
        incarnation=item["inc"]["S"],
        content_type=item["ct"]["S"],
        tail=_int(item, "tail"),
        closed=bool(item.get("closed", {}).get("BOOL", False)),
        closed_by=decode_claim(closed_by) if closed_by is not None else None,
        last_stream_seq=_str(item, "sseq"),
        ttl_seconds=_int(item, "ttl") if "ttl" in item else None,
        expires_at=_num(item, "exp"),
        last_access=_num(item, "acc") or 0.0,
        created_at=_num(item, "ctime") or 0.0,
        soft_deleted=bool(item.get("del", {}).get("BOOL", False)),
        forked_from=_str(item, "src"),
        source_incarnation=_str(item, "srci"),
        fork_position=_int(item, "fpos"),
        inherited=tuple(
            Segment(m["M"]["inc"]["S"], int(m["M"]["s"]["N"]), int(m["M"]["e"]["N"]))
            for m in item.get("inh", {}).get("L", [])
        ),
        ref_count=_int(item, "refs"),
        # Absent on streams written before windows were kept: every read then renews.
        renew_window=_num(item, "rw") or 0.0,
        sealed=_int(item, "sd"),
        # Absent on streams written before ranges were reserved: nothing is pending there.
        published=_int(item, "tail"),
        reserved=_int(item, "rsv") if "rsv" in item else None,
        ranges=_int(item, "rn"),
        published_ranges=_int(item, "tn"),
        reserved_at=_num(item, "rt") or 0.0,
        counted="rn" in item,
        held_until=_num(item, "hold") or 0.0,
        retention=_str(item, "ret"),
        retained=decode_retained(item),
        pending_cut=_decode_cut(item.get("cut")),
        compaction_refused=_str(item, "cxr"),
        compaction_retry_at=_int(item, "cxp"),
    )


# Retention (`core.storage.retention`): the stream item's `rf` (where retained data starts)
# and `snap` (the snapshot before it), and `cut`: the same two, announced to take effect at
# `eff`. A snapshot's object is also named by an item of the incarnation's partition,
# `a#<at>`, which sorts before every chunk, so that the collector counts it as named.
SNAPSHOT_SORT_PREFIX = "a#"


def snapshot_sort_key(at: int) -> str:
    return f"{SNAPSHOT_SORT_PREFIX}{at:0{_POSITION_WIDTH}d}"


def encode_snapshot(snapshot: Snapshot) -> Item:
    return {
        "M": {
            "at": n(snapshot.at),
            "k": s(snapshot.key),
            "sz": n(snapshot.size),
            "cnt": n(snapshot.count),
            "fd": n(snapshot.folded),
        }
    }


def decode_snapshot(value: Item | None) -> Snapshot | None:
    if value is None:
        return None
    m = value["M"]
    return Snapshot(_int(m, "at"), m["k"]["S"], _int(m, "sz"), _int(m, "cnt"), _int(m, "fd"))


def encode_retained(retained: Retained) -> Item:
    item: Item = {"rf": n(retained.start), "rft": n(retained.since)}
    if retained.snapshot is not None:
        item["snap"] = encode_snapshot(retained.snapshot)
    return item


def decode_retained(item: Item) -> Retained:
    return Retained(_int(item, "rf"), decode_snapshot(item.get("snap")), _num(item, "rft") or 0.0)


def encode_cut(cut: PendingCut) -> Item:
    return {"M": {**encode_retained(cut.retained), "eff": n(cut.effective_at)}}


def _decode_cut(value: Item | None) -> PendingCut | None:
    if value is None:
        return None
    return PendingCut(decode_retained(value["M"]), _num(value["M"], "eff") or 0.0)


def encode_page_cursor(last_key: Item) -> str:
    """A listing's resume point (the scan's last key) as an opaque URL-safe token."""
    plain = {name: value["S"] for name, value in last_key.items()}
    return base64.urlsafe_b64encode(json.dumps(plain, sort_keys=True).encode()).decode()


def decode_page_cursor(cursor: str) -> Item | None:
    """The scan key a cursor stands for; None when it is not one this table minted."""
    try:
        plain = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, binascii.Error, UnicodeError):
        return None
    if (
        not isinstance(plain, dict)
        or set(plain) != {"pk", "sk"}
        or not all(isinstance(value, str) and value for value in plain.values())
    ):
        return None
    partition, sort = plain["pk"], plain["sk"]
    if not _fits(partition, sort) or not partition.startswith(_PARTITION_KINDS):
        return None
    return _key(partition, sort)


SUBSCRIPTION_PARTITION = "sub#"
SUBSCRIPTION_LINK_PREFIX = "sl#"
# What a partition key of this table starts with: streams, chunk data, range claims, retired
# incarnations, sealing marks, subscriptions and their links. A listing's scan may stop on any
# of them.
_PARTITION_KINDS = (
    STREAM_PREFIX,
    CHUNK_PREFIX,
    CLAIM_PREFIX,
    RETIRE_PREFIX,
    SEAL_PREFIX,
    RETENTION_PREFIX,
    SUBSCRIPTION_PARTITION,
    SUBSCRIPTION_LINK_PREFIX,
)


def _fits(partition: str, sort: str) -> bool:
    return (
        utf8_length(partition) <= DYNAMODB_PARTITION_KEY_BYTES
        and utf8_length(sort) <= DYNAMODB_SORT_KEY_BYTES
        and len(partition) > len("s#")
    )


def encode_claim(claim: ProducerClaim) -> Item:
    return {"M": {"id": s(claim.producer_id), "ep": n(claim.epoch), "sq": n(claim.seq)}}


def decode_claim(value: Item) -> ProducerClaim:
    m = value["M"]
    return ProducerClaim(m["id"]["S"], int(m["ep"]["N"]), int(m["sq"]["N"]))


def decode_producer(item: Item | None, incarnation: str) -> ProducerState | None:
    """Producer state is only valid for the incarnation that wrote it."""
    if item is None or _str(item, "inc") != incarnation:
        return None
    return ProducerState(epoch=_int(item, "ep"), last_seq=_int(item, "sq"))


def pack_lengths(lengths: tuple[int, ...]) -> bytes:
    return struct.pack(f"<{len(lengths)}I", *lengths)


def unpack_lengths(packed: bytes) -> tuple[int, ...]:
    return struct.unpack(f"<{len(packed) // 4}I", packed)
