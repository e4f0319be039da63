"""Write the synchronous client from the asynchronous one.

`core/client/_async.py` is the source; `core/client/_sync.py` is what it reads as once every
`async` and `await` is dropped and each asyncio name is swapped for its blocking twin (the way
httpcore keeps its two clients). So a fix made in the async client reaches the sync one, and
one made in the sync one alone is undone, or caught by the suite (tests/client/test_unasync.py
runs `--check`). Run it after changing `_async.py`:

    python3 scripts/unasync.py          # write core/client/_sync.py
    python3 scripts/unasync.py --check  # exit 1 if the checked-in _sync.py differs

The rewriting is by whole words only: an identifier that merely contains `async` or `aread`
is left alone. Its output is formatted with ruff (a shorter line may now fit on one), so the
generated file passes the same format check as the rest.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "core" / "client" / "_async.py"
TARGET = ROOT / "core" / "client" / "_sync.py"

# Whole words of the async client and what the sync client says instead.
WORDS = {
    "AsyncDurableStream": "DurableStream",
    "AsyncIterator": "Iterator",
    "AsyncClient": "Client",
    "aread": "read",
    "aiter_bytes": "iter_bytes",
    "aclose": "close",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
}

# Rewrites beyond single words, in order: (pattern, replacement), multi-line.
PATTERNS: list[tuple[str, str]] = [
    (r"^# The source of _sync\.py.*\n(#.*\n)*", ""),
    (r"^import asyncio\n", ""),
    (r"\basyncio\.sleep\b", "time.sleep"),
    (r"\bfrom asyncio code\b", "from synchronous code"),
    (r"\basync (def|with|for)\b", r"\1"),
    # (await self.head()).x is self.head().x; a call's own parentheses stay.
    (r"(?<![\w)\]])\(await ([\w.]+\([^()]*\))\)", r"\1"),
    (r"\bawait ", ""),
    # An async generator cannot `yield from`; the sync one delegates, so that closing it
    # closes the generator it reads from (and the connection that one holds) at once.
    (r"^( *)for (\w+) in (.+):\n\1    yield \2\n", r"\1yield from \3\n"),
]

HEADER = (
    "# Generated from _async.py by scripts/unasync.py: do not edit; change _async.py and run\n"
    "# `python3 scripts/unasync.py`.\n"
)


def unasync(source: str) -> str:
    """The sync module's text from the async module's (before formatting)."""
    text = source
    for word, replacement in WORDS.items():
        text = re.sub(rf"\b{re.escape(word)}\b", replacement, text)
    for pattern, replacement in PATTERNS:
        text = re.sub(pattern, replacement, text, flags=re.MULTILINE)
    return _after_docstring(text, HEADER)


def _after_docstring(text: str, lines: str) -> str:
    """`lines` put after the module's docstring (the first statement must stay the docstring)."""
    match = re.match(r'"""(?:.|\n)*?"""\n', text)
    cut = match.end() if match else 0
    return text[:cut] + "\n" + lines + text[cut:]


def formatted(text: str, path: Path) -> str:
    """`text` as `ruff format` would leave it at `path` (its settings apply)."""
    run = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(path), "-"],
        input=text,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    return run.stdout


def generated() -> str:
    return formatted(unasync(SOURCE.read_text()), TARGET)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="only say whether _sync.py is current")
    args = parser.parse_args(argv)
    wanted = generated()
    if args.check:
        current = TARGET.read_text() if TARGET.exists() else ""
        if current != wanted:
            where = TARGET.relative_to(ROOT)
            print(f"{where} is not what {SOURCE.name} generates: run", file=sys.stderr)
            print("`python3 scripts/unasync.py`", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
