"""The sync client is generated from the async one (scripts/unasync.py): the checked-in
`_sync.py` must be exactly what the script writes, so a fix made in one client only is caught
here; and the rewriting itself, rule by rule."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "unasync.py"
# Loaded from its file: `scripts` is a folder of tools, not a package to import by name.
_spec = importlib.util.spec_from_file_location("unasync_script", SCRIPT)
assert _spec is not None and _spec.loader is not None
script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(script)
ROOT, TARGET, generated, unasync = script.ROOT, script.TARGET, script.generated, script.unasync


def test_the_checked_in_sync_client_is_what_the_async_one_generates() -> None:
    assert TARGET.read_text() == generated(), (
        "core/client/_sync.py differs from what core/client/_async.py generates: change "
        "_async.py (not _sync.py), then run `python3 scripts/unasync.py`"
    )


def test_the_check_command_agrees() -> None:
    run = subprocess.run(
        [sys.executable, "scripts/unasync.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr


def body(text: str) -> str:
    """What `unasync` makes of `text`, without the header it puts after the docstring."""
    return unasync('"""Doc."""\n' + text).split("`python3 scripts/unasync.py`.\n", 1)[1]


def test_async_keywords_go_and_asyncio_names_become_their_blocking_twins() -> None:
    source = (
        "import asyncio\n"
        "async def f(client: httpx.AsyncClient) -> AsyncIterator[int]:\n"
        "    async with client.stream() as response:\n"
        "        await response.aread()\n"
        "        async for chunk in response.aiter_bytes():\n"
        "            await asyncio.sleep(1)\n"
        "    await client.aclose()\n"
    )
    assert body(source) == (
        "def f(client: httpx.Client) -> Iterator[int]:\n"
        "    with client.stream() as response:\n"
        "        response.read()\n"
        "        for chunk in response.iter_bytes():\n"
        "            time.sleep(1)\n"
        "    client.close()\n"
    )


def test_only_whole_words_are_rewritten() -> None:
    source = "unasync_thing = areader.aclosed + AsyncDurableStreamer + my_await\n"
    assert body(source) == source


def test_a_generator_handed_on_item_by_item_is_delegated_to() -> None:
    source = "    async for batch in self._read(offset):\n        yield batch\n"
    assert body(source) == "    yield from self._read(offset)\n"
    other = "    for batch in batches:\n        yield batch.data\n"  # not the same item: kept
    assert body(other) == other


def test_an_awaited_call_in_parentheses_loses_them_and_a_calls_own_stay() -> None:
    source = "x = (await self.head()).content_type or f(await self.send(r))\n"
    assert body(source) == "x = self.head().content_type or f(self.send(r))\n"


def test_the_header_follows_the_docstring_and_the_source_note_goes() -> None:
    source = (
        '"""`AsyncDurableStream`: one stream URL, from asyncio code."""\n\n'
        "# The source of _sync.py: edit here.\n# More of the note.\n\nimport time\n"
    )
    lines = unasync(source).splitlines()
    assert lines[0] == '"""`DurableStream`: one stream URL, from synchronous code."""'
    assert lines[2].startswith("# Generated from _async.py by scripts/unasync.py")
    assert "# The source" not in unasync(source) and "import time" in lines
