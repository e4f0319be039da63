"""The optimistic write, bounded: read, decide, write with a condition on the version read,
and on a lost race (`Conflict`) do it all again, a bounded number of times."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ..storage.aws import Conflict
from ..storage.model import StoreUnavailable

T = TypeVar("T")

# Far more tries than racing writers ever make a write lose in practice (each lost race
# means another writer's write landed): reaching it means the item is contended without
# end, and the caller is better told to come back than kept spinning.
ATTEMPTS = 64


class WriteContention(StoreUnavailable):
    """A write lost its race `attempts` times in a row. A kind of StoreUnavailable: the HTTP
    layer answers 503 with Retry-After, and the delivery worker runs the task again."""

    def __init__(self, attempts: int) -> None:
        super().__init__(f"a subscription write lost its race {attempts} times in a row")
        self.attempts = attempts


def retry_on_conflict(attempt: Callable[[], T], *, attempts: int = ATTEMPTS) -> T:
    """What `attempt` answers, calling it again each time it raises Conflict (it reads
    afresh each time), at most `attempts` times; WriteContention after that."""
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    for _ in range(attempts):
        try:
            return attempt()
        except Conflict:
            continue
    raise WriteContention(attempts)
