"""Settling a stream's pending ranges: where its readable data ends, voiding ranges whose
writers never filled them, and publishing the tail on the stream item.

Reads of a stream whose item shows ranges pending above its published tail (`StreamInfo.
settled` false) look at the items there (one Query) to find where readable data ends
(`_ranges.resolve`). A gap that stays pending past the bound is voided: each of its ranges is
claimed void, and one void chunk covers its bytes, in one transaction that fails if any range
was filled meanwhile (then the items are looked at again). Publishing moves the stream item's
tail up to the readable end, so later reads need not look (a conditional write that only ever
moves the tail forward).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from enum import Enum
from typing import Any

from . import _requests as requests
from ._ranges import DEFAULT_VOID_AFTER_SECONDS, Gap, Placed, resolve, void_due
from .aws import Conflict, call, each_item, request_token
from .model import StoreUnavailable, StreamInfo

# A transaction holds at most 100 actions: the ranges of a gap are claimed this many at a time
# (with room for the void chunk and the check that the gap is still pending).
_CLAIMS_PER_TRANSACTION = 97
# Gaps remembered with the time they were first seen here.
_GAPS_REMEMBERED = 1024
# Times one settling voids a gap and looks again, before it answers what it found.
_SETTLE_ROUNDS = 4


class Claim(Enum):
    """What a range's claim says."""

    FILLED = "filled"
    VOID = "void"
    UNKNOWN = "unknown"


class Settler:
    def __init__(
        self,
        dynamodb: Any,
        table: str,
        clock: Callable[[], float],
        void_after: float = DEFAULT_VOID_AFTER_SECONDS,
    ) -> None:
        self.dynamodb = dynamodb
        self.table = table
        self.clock = clock
        self.void_after = void_after
        self._lock = threading.Lock()
        self._first_seen: OrderedDict[tuple[str, int, int], float] = OrderedDict()

    def settle(self, info: StreamInfo, publish: bool = False, write: bool = True) -> StreamInfo:
        """The stream with `tail` where its readable data ends (voiding gaps that waited past
        the bound); with `publish`, also recorded on the stream item. Without `write`, it only
        looks (a reader whose role may not write)."""
        if info.settled:
            return info
        for _ in range(_SETTLE_ROUNDS):
            resolution = resolve(
                info.published_tail,
                info.published_ranges,
                info.reserved_end,
                info.ranges,
                self._placed(info),
            )
            gap = resolution.gap
            if gap is None or not write or not self._void_due(info, resolution.gaps):
                break
            if not self.void(info, gap):
                break
        settled = replace(info, tail=resolution.readable)
        publish = publish and write and resolution.readable > info.published_tail
        if publish and self.publish(info, resolution.readable, resolution.readable_number):
            settled = replace(
                settled, published=resolution.readable, published_ranges=resolution.readable_number
            )
        return settled

    def _placed(self, info: StreamInfo) -> list[Placed]:
        """The items ending above the published tail, up to the reserved end."""
        request = requests.placed_above_tail(self.table, info)
        return [
            Placed(
                start=int(item["st"]["N"]),
                end=int(item["sk"]["S"][2:]),
                number=int(item["n"]["N"]) if "n" in item else 0,
                void=bool(item.get("v", {}).get("BOOL", False)),
                first_number=int(item["n0"]["N"]) if "n0" in item else None,
            )
            for item in each_item(self.dynamodb.query, request)
        ]

    def _void_due(self, info: StreamInfo, gaps: tuple[Gap, ...]) -> bool:
        """Whether the first gap may be voided now. Every gap seen is remembered from the
        first time it is seen here, so that one whose writer died behind another dead range
        is due as soon as that one is voided, not a bound later."""
        now = self.clock()
        with self._lock:
            seen = [self._seen(info, gap, now) for gap in gaps]
            while len(self._first_seen) > _GAPS_REMEMBERED:
                self._first_seen.popitem(last=False)
        return void_due(seen[0], info.reserved_at, now, self.void_after)

    def _seen(self, info: StreamInfo, gap: Gap, now: float) -> float:
        key = (info.incarnation, gap.start, gap.numbers[0] if gap.numbers else 0)
        first_seen = self._first_seen.setdefault(key, now)
        self._first_seen.move_to_end(key)
        return first_seen

    def void(self, info: StreamInfo, gap: Gap) -> bool:
        """Claim every range of the gap void, then lay the void chunk over its bytes; False
        when one of them was filled meanwhile (nothing of the gap is then voided by the
        transaction that found it, and the caller looks again)."""
        now = self.clock()
        numbers = list(gap.numbers)
        # A gap without ranges (never made by reservations) is still covered, numberless.
        span = (numbers[0], numbers[-1]) if numbers else (info.published_ranges,) * 2
        try:
            while len(numbers) > _CLAIMS_PER_TRANSACTION:
                batch, numbers = (
                    numbers[:_CLAIMS_PER_TRANSACTION],
                    numbers[_CLAIMS_PER_TRANSACTION:],
                )
                self._write(
                    [
                        *(requests.void_claim(self.table, info.incarnation, k, now) for k in batch),
                        requests.still_pending(self.table, info, gap.start),
                    ]
                )
            self._write(
                [
                    *(requests.void_claim(self.table, info.incarnation, k, now) for k in numbers),
                    requests.void_chunk(self.table, info.incarnation, gap.start, gap.end, span),
                    requests.still_pending(self.table, info, gap.start),
                ]
            )
        except Conflict:
            return False
        return True

    def void_own(self, info: StreamInfo, start: int, end: int, number: int) -> Claim:
        """Give up a range this writer reserved and will not fill (its append was refused
        after the reservation, or its fill failed): readers pass over it at once instead of
        waiting. What the range's claim says afterwards: VOID (by this call, or by a reader
        that gave up on it), or FILLED (a fill whose answer was lost did land). Best effort:
        UNKNOWN when the store could not be asked; readers void the range in time."""
        claim = requests.own_void_claim(self.table, info.incarnation, number, self.clock())
        void = requests.void_chunk(self.table, info.incarnation, start, end, (number, number))
        try:
            self._write([claim, void])
        except Conflict:
            return self.claim_of(info, number)
        except StoreUnavailable:
            return Claim.UNKNOWN
        return Claim.VOID

    def claim_of(self, info: StreamInfo, number: int) -> Claim:
        try:
            request = requests.get_range_claim(self.table, info.incarnation, number)
            response = call(self.dynamodb.get_item, **request)
        except StoreUnavailable:
            return Claim.UNKNOWN
        item = response.get("Item")
        if item is None:
            return Claim.UNKNOWN
        return Claim.VOID if item.get("v", {}).get("BOOL", False) else Claim.FILLED

    def publish(self, info: StreamInfo, readable: int, number: int) -> bool:
        """Move the stored tail forward to `readable` (never back)."""
        try:
            update = requests.publish_tail(self.table, info, readable, number)
            call(self.dynamodb.update_item, **update)
        except Conflict:
            return False
        return True

    def _write(self, actions: list[dict[str, Any]]) -> None:
        call(
            self.dynamodb.transact_write_items,
            TransactItems=actions,
            ClientRequestToken=request_token(),
        )
