"""A TCP proxy for the tests, between a client and `dsaws serve`, that misbehaves on purpose.

It reads one HTTP/1.1 request per client connection (the request head and a Content-Length
body), asks `decide` what to do with it, and then drops the connection before the server sees
the request, answers a status of its own, or forwards it (after an optional delay, so that
pipelined requests overtake each other) and then either relays the server's answer or drops the
connection after the server has acted. Every connection carries one request (`Connection:
close` both ways), which keeps the proxy simple and the faults exact.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Action:
    drop_before: bool = False
    status: int | None = None  # answer this instead of forwarding
    retry_after: str | None = None
    delay: float = 0.0
    drop_after: bool = False


FORWARD = Action()


@dataclass(frozen=True)
class Seen:
    method: str
    target: str
    headers: dict[str, str]


class FaultProxy:
    def __init__(self, upstream_port: int, decide: Callable[[Seen], Action]) -> None:
        self.upstream_port = upstream_port
        self.decide = decide
        self.port = 0
        self.counts: Counter[str] = Counter()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._server: asyncio.AbstractServer | None = None

    def start(self) -> FaultProxy:
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", 0)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    name, value = line.split(":", 1)
                    headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            action = self.decide(Seen(method, target, headers))
            if action.drop_before:
                self.counts["dropped before"] += 1
                return
            if action.status is not None:
                self.counts[f"answered {action.status}"] += 1
                extra = f"Retry-After: {action.retry_after}\r\n" if action.retry_after else ""
                writer.write(
                    f"HTTP/1.1 {action.status} Injected\r\nContent-Length: 0\r\n{extra}"
                    "Connection: close\r\n\r\n".encode()
                )
                await writer.drain()
                return
            if action.delay:
                await asyncio.sleep(action.delay)
            answer = await self._forward(head, body)
            if answer is None:
                self.counts["server down"] += 1
                return  # the server is not there: the client sees the connection drop
            if action.drop_after:
                self.counts["dropped after"] += 1
                return
            self.counts["forwarded"] += 1
            writer.write(answer)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    async def _forward(self, head: bytes, body: bytes) -> bytes | None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            return None
        try:
            up_writer.write(_with_connection_close(head) + body)
            await up_writer.drain()
            return await up_reader.read()  # the server closes after its answer
        finally:
            up_writer.close()


def _with_connection_close(head: bytes) -> bytes:
    lines = [
        line for line in head.split(b"\r\n") if line and not line.lower().startswith(b"connection:")
    ]
    return b"\r\n".join([*lines, b"Connection: close", b"", b""])
