"""The upstream Durable Streams clients, driven from Python: the interoperability tests and the
side-by-side benchmarks use them against our server.

The TypeScript client runs in Node through `node/ts_client.mjs`, a small command line over it.
The packages built on the protocol (the Yjs layer, StreamDB state, the AI SDK transport) run
through the drivers in `ecosystem/`, a project of their own so that the client's tests and
benchmarks do not install the AI SDK.
Node projects are installed outside the source tree (so `node_modules` never ends up in a Lambda
package built from it), and again only when their lock file changes.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CACHE = Path.home() / ".cache" / "durable-streams-aws"


class NodeMissing(RuntimeError):
    """npm or node is not installed (the project needs Node 20)."""


def install_node_project(source: Path, work: Path) -> Path:
    """Copy the npm project at `source` (its files, not node_modules) to `work` and install it
    there from its package-lock.json with `npm ci`; returns `work`."""
    work.mkdir(parents=True, exist_ok=True)
    for path in source.iterdir():
        if path.is_file():
            shutil.copyfile(path, work / path.name)
    lock = hashlib.sha256((source / "package-lock.json").read_bytes()).hexdigest()
    stamp = work / "node_modules" / ".installed-from"
    if stamp.exists() and stamp.read_text() == lock:
        return work
    npm = shutil.which("npm")
    if npm is None:
        raise NodeMissing("npm is needed (Node 20): install Node.js")
    subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=work, check=True)
    stamp.write_text(lock)
    return work


def find_node() -> str:
    """The `node` executable, or NodeMissing."""
    node = shutil.which("node")
    if node is None:
        raise NodeMissing("node is needed (Node 20): install Node.js")
    return node


def ts_client_command() -> list[str]:
    """The command that runs `ts_client.mjs` (installing the TypeScript client first if needed)."""
    node = find_node()
    work = install_node_project(HERE / "node", CACHE / "interop")
    return [node, str(work / "ts_client.mjs")]


def run_ts_client(*args: str, timeout: float = 120) -> Any:
    """Run one `ts_client.mjs` command; returns what it printed as JSON, or raises with its
    standard error when it failed."""
    done = subprocess.run(
        [*ts_client_command(), *args], capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise RuntimeError(f"ts_client {args[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def ecosystem_command(driver: str) -> list[str]:
    """The command that runs the driver `ecosystem/<driver>.mjs` (installing the ecosystem
    packages first if needed)."""
    node = find_node()
    work = install_node_project(HERE / "ecosystem", CACHE / "ecosystem")
    return [node, str(work / f"{driver}.mjs")]


def run_ecosystem(driver: str, *args: str, timeout: float = 120) -> Any:
    """Run an ecosystem driver; returns what it printed as JSON, or raises with the end of its
    standard error (less the stack frames) when it failed."""
    done = subprocess.run(
        [*ecosystem_command(driver), *args], capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if not line.startswith("    at ")]
        raise RuntimeError(f"{driver} failed ({done.returncode}):\n" + "\n".join(lines)[-3000:])
    return json.loads(done.stdout)
