from __future__ import annotations

from collections.abc import Iterator

import pytest
from flavours import FLAVOURS, StreamOpener


@pytest.fixture(params=FLAVOURS)
def open_stream(request: pytest.FixtureRequest) -> Iterator[StreamOpener]:
    """Opens streams of the sync client, then (the test again) of the async one."""
    opener = StreamOpener(request.param)
    yield opener
    opener.close_all()
