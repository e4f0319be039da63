"""A proxy in front of `dsaws serve` for the upstream client conformance suite.

The suite's runner talks to one base URL: it creates streams at `<base>/<name>`, and injects
faults through `POST <base>/_test/inject-error` (`DELETE` clears them), an endpoint only the
upstream reference server has. This proxy serves that base URL: it plays the fault endpoint
itself (answer a status, with Retry-After; wait; drop the connection; truncate or corrupt the
body; put an extra event at the head of an event stream; on the next `count` requests to a
path, of one method or any, with a probability) and forwards everything else to the server
under its stream prefix.

    python3 -m interop.conformance_proxy --port 4440 --upstream http://127.0.0.1:4437/v1/stream

One request per client connection (`Connection: close`), so the faults are exact and an answer
whose length is not known is simply sent until the connection closes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

CONTROL = "/_test/inject-error"
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


@dataclass
class Fault:
    count: int = 1
    status: int | None = None
    retry_after: int | None = None
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    drop: bool = False
    truncate: int | None = None
    corrupt: bool = False
    probability: float | None = None
    method: str | None = None
    sse_event: dict[str, str] | None = None

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Fault:
        return cls(
            count=int(body.get("count") or 1),
            status=body.get("status"),
            retry_after=body.get("retryAfter"),
            delay_ms=float(body.get("delayMs") or 0),
            jitter_ms=float(body.get("jitterMs") or 0),
            drop=bool(body.get("dropConnection")),
            truncate=body.get("truncateBodyBytes"),
            corrupt=bool(body.get("corruptBody")),
            probability=body.get("probability"),
            method=body.get("method"),
            sse_event=body.get("injectSseEvent"),
        )


@dataclass
class Faults:
    by_path: dict[str, Fault] = field(default_factory=dict)

    def take(self, path: str, method: str) -> Fault | None:
        """The fault to play on this request, if any (each one counts down)."""
        fault = self.by_path.get(path)
        if fault is None:
            return None
        if fault.method and fault.method.upper() != method.upper():
            return None
        if fault.probability is not None and random.random() > fault.probability:
            return None
        fault.count -= 1
        if fault.count <= 0:
            del self.by_path[path]
        return fault


def corrupted(body: bytes) -> bytes:
    """Breaks a JSON body for certain: its first bytes become letters, and a tenth of the rest
    too."""
    damaged = bytearray(body)
    damaged[0:2] = b"XY"[: len(damaged)]
    for _ in range(max(1, len(damaged) // 10)):
        damaged[random.randrange(len(damaged))] = ord("Z")
    return bytes(damaged[: len(body)])


class Proxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.faults = Faults()
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(120.0, connect=10.0))

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._handle(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = [tuple(line.split(":", 1)) for line in lines[1:] if ":" in line]
        fields = {name.strip().lower(): value.strip() for name, value in headers}
        body = await _read_body(reader, fields)
        path = urlsplit(target).path
        if path == CONTROL:
            await self._control(method, body, writer)
            return
        fault = self.faults.take(path, method)
        if fault is not None:
            delay = fault.delay_ms + random.random() * fault.jitter_ms
            if delay:
                await asyncio.sleep(delay / 1000)
            if fault.drop:
                writer.transport.abort()
                return
            if fault.status is not None:
                extra = {"Content-Type": "text/plain"}
                if fault.retry_after is not None:
                    extra["Retry-After"] = str(fault.retry_after)
                await _answer(writer, fault.status, extra, b"Injected error for testing")
                return
        forward = [
            (n.strip(), v.strip()) for n, v in headers if n.strip().lower() not in HOP_BY_HOP
        ]
        request = self.client.build_request(
            method, self.upstream + target, headers=forward, content=body or None
        )
        response = await self.client.send(request, stream=True)
        try:
            await self._relay(method, response, fault, writer)
        finally:
            await response.aclose()

    async def _relay(
        self,
        method: str,
        response: httpx.Response,
        fault: Fault | None,
        writer: asyncio.StreamWriter,
    ) -> None:
        headers = [
            (name, value)
            for name, value in response.headers.raw
            if name.decode().lower() not in HOP_BY_HOP
        ]
        event_stream = response.headers.get("content-type", "").startswith("text/event-stream")
        reason = response.reason_phrase or "-"
        status_line = f"HTTP/1.1 {response.status_code} {reason}\r\n".encode()
        no_body = method == "HEAD" or response.status_code in (204, 304)
        if event_stream:
            writer.write(status_line + _head(headers, None))
            if fault is not None and fault.sse_event:
                event = fault.sse_event
                writer.write(f"event: {event['eventType']}\ndata: {event['data']}\n\n".encode())
            async for chunk in response.aiter_raw():
                writer.write(chunk)
                await writer.drain()
            return
        # Raw bytes: the answer is relayed with its Content-Encoding, as the server sent it.
        body = b"" if no_body else b"".join([chunk async for chunk in response.aiter_raw()])
        if fault is not None and fault.truncate is not None:
            body = body[: fault.truncate]
        if fault is not None and fault.corrupt and body:
            body = corrupted(body)
        length = None if no_body else len(body)
        if no_body and "content-length" in response.headers:
            headers.append((b"Content-Length", response.headers["content-length"].encode()))
        writer.write(status_line + _head(headers, length) + body)
        await writer.drain()

    async def _control(self, method: str, body: bytes, writer: asyncio.StreamWriter) -> None:
        if method == "DELETE":
            self.faults.by_path.clear()
            await _answer(writer, 200, {"Content-Type": "text/plain"}, b"cleared")
            return
        if method != "POST":
            await _answer(writer, 405, {"Content-Type": "text/plain"}, b"POST or DELETE")
            return
        config = json.loads(body or b"{}")
        if not config.get("path"):
            await _answer(writer, 400, {"Content-Type": "text/plain"}, b"path is required")
            return
        self.faults.by_path[config["path"]] = Fault.from_json(config)
        await _answer(writer, 200, {"Content-Type": "text/plain"}, b"injected")


async def _read_body(reader: asyncio.StreamReader, fields: dict[str, str]) -> bytes:
    if "content-length" in fields:
        return await reader.readexactly(int(fields["content-length"]))
    if fields.get("transfer-encoding", "").lower() != "chunked":
        return b""
    body = b""
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            return body
        body += await reader.readexactly(size)
        await reader.readexactly(2)


def _head(headers: list[tuple[bytes, bytes]], length: int | None) -> bytes:
    lines = [name + b": " + value for name, value in headers]
    if length is not None:
        lines.append(b"Content-Length: " + str(length).encode())
    lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def _answer(
    writer: asyncio.StreamWriter, status: int, headers: dict[str, str], body: bytes
) -> None:
    fields = [(name.encode(), value.encode()) for name, value in headers.items()]
    writer.write(f"HTTP/1.1 {status} -\r\n".encode() + _head(fields, len(body)) + body)
    await writer.drain()


async def run(port: int, upstream: str) -> None:
    proxy = Proxy(upstream)
    server = await asyncio.start_server(proxy.handle, "127.0.0.1", port)
    print(f"conformance proxy on http://127.0.0.1:{port} -> {upstream}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=4440)
    parser.add_argument("--upstream", default="http://127.0.0.1:4437/v1/stream")
    args = parser.parse_args()
    asyncio.run(run(args.port, args.upstream))


if __name__ == "__main__":
    main()
