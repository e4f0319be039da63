"""`dsaws serve` freezes what survives a slow full collection (`core.cli`)."""

from __future__ import annotations

import gc
import time

from core.cli import _FreezeAfterSlowCollections


def _collection(callback: _FreezeAfterSlowCollections, generation: int, seconds: float) -> None:
    callback("start", {"generation": generation})
    time.sleep(seconds)
    callback("stop", {"generation": generation})


def test_only_a_slow_full_collection_freezes_its_survivors() -> None:
    callback = _FreezeAfterSlowCollections(slow=0.05)
    gc.unfreeze()
    try:
        _collection(callback, generation=2, seconds=0)
        _collection(callback, generation=1, seconds=0.1)  # young generations: never
        assert gc.get_freeze_count() == 0
        _collection(callback, generation=2, seconds=0.1)
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
