"""`durable_streams_aws.client` as a client adapter for the upstream client conformance suite.

The suite (`packages/client-conformance-tests` in the durable-streams repository) starts this
program and drives it with one JSON command per line on stdin; every command gets one JSON
result per line on stdout. Everything here goes through the public API of
`durable_streams_aws.client`: the adapter only translates the suite's vocabulary (commands,
camelCase options, error codes) into calls, and the answers back. See docs/client.md ("The
upstream client conformance suite") for how to run the suite.

    python3 -m interop.client_conformance_adapter
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import re
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from durable_streams_aws.client import (
    AsyncDurableStream,
    BadRequest,
    Batch,
    DurableStreamError,
    IdempotentProducer,
    Offset,
    OutcomeUnknown,
    ProducerError,
    ProducerSettings,
    SequenceConflict,
    StreamClosed,
    StreamConflict,
    StreamNotFound,
    Unavailable,
)

Result = dict[str, Any]

LIVE_MODES: dict[Any, Any] = {None: None, False: None, True: "auto", "long-poll": "long-poll"}
LIVE_MODES["sse"] = "sse"

# The suite names options in camelCase; our errors name the Python parameters.
OPTION_NAMES = {
    "max_batch_bytes": "maxBatchBytes",
    "max_in_flight": "maxInFlight",
    "producer_id": "producerId",
}


@dataclass
class Dynamic:
    """A header or query parameter computed afresh for every request (a counter, the time, or
    a token the suite replaces between commands)."""

    kind: str
    token: str = ""
    counter: int = 0

    def __call__(self) -> str:
        if self.kind == "counter":
            self.counter += 1
            return str(self.counter)
        if self.kind == "timestamp":
            return str(int(time.time() * 1000))
        return self.token


class Adapter:
    def __init__(self) -> None:
        self.server_url = ""
        self.content_types: dict[str, str] = {}
        self.streams: dict[str, AsyncDurableStream] = {}
        self.producers: dict[tuple[str, str, int], IdempotentProducer] = {}
        self.dynamic_headers: dict[str, Dynamic] = {}
        self.dynamic_params: dict[str, Dynamic] = {}
        self.last_request: httpx.Request | None = None
        self.client = self._new_client()

    def _new_client(self) -> httpx.AsyncClient:
        async def seen(request: httpx.Request) -> None:
            self.last_request = request

        timeout = httpx.Timeout(30.0, connect=10.0)
        return httpx.AsyncClient(timeout=timeout, event_hooks={"request": [seen]})

    # ---------------------------------------------------------------- plumbing

    def url(self, path: str) -> str:
        if not self.dynamic_params:
            return f"{self.server_url}{path}"
        # The client has no per-request query parameters: they are fixed for the command.
        params = {name: value() for name, value in self.dynamic_params.items()}
        return str(httpx.URL(f"{self.server_url}{path}").copy_merge_params(params))

    def stream(self, path: str, headers: dict[str, str] | None = None) -> AsyncDurableStream:
        """The stream at `path`, kept between commands so that what the client learnt of it
        (its content type, its tail) stays known, as it would in an application."""
        stream = self.streams.get(path)
        if stream is None:
            stream = AsyncDurableStream(self.url(path), client=self.client)
            self.streams[path] = stream
        stream.url = self.url(path)
        stream.content_type = self.content_types.get(path, stream.content_type)
        fixed = dict(headers or {})
        dynamic = dict(self.dynamic_headers)

        def current() -> dict[str, str]:
            return {**{name: value() for name, value in dynamic.items()}, **fixed}

        stream.headers = current if dynamic else fixed
        return stream

    def sent(self, result: Result) -> Result:
        """Adds what the last request carried of the dynamic headers and parameters."""
        request = self.last_request
        if request is not None and self.dynamic_headers:
            result["headersSent"] = {
                name: request.headers.get(name, "") for name in self.dynamic_headers
            }
        if request is not None and self.dynamic_params:
            result["paramsSent"] = {
                name: request.url.params.get(name, "") for name in self.dynamic_params
            }
        return result

    def forget(self, path: str) -> None:
        self.content_types.pop(path, None)
        self.streams.pop(path, None)
        for key in [key for key in self.producers if key[0] == path]:
            del self.producers[key]

    # ---------------------------------------------------------------- commands

    async def init(self, cmd: dict[str, Any]) -> Result:
        self.server_url = cmd["serverUrl"].rstrip("/")
        self.content_types.clear()
        self.streams.clear()
        self.producers.clear()
        self.dynamic_headers.clear()
        self.dynamic_params.clear()
        return {
            "type": "init",
            "success": True,
            "clientName": "durable-streams-aws durable_streams_aws.client",
            "clientVersion": "0",
            "features": {
                "batching": True,
                "sse": True,
                "longPoll": True,
                "auto": True,
                "streaming": True,
                "dynamicHeaders": True,
                "strictZeroValidation": True,
            },
        }

    async def create(self, cmd: dict[str, Any]) -> Result:
        path = cmd["path"]
        content_type = cmd.get("contentType") or "application/octet-stream"
        stream = self.stream(path, cmd.get("headers"))
        try:
            await stream.head()
            existed = True
        except StreamNotFound:
            existed = False
        options: dict[str, Any] = {}
        if cmd.get("ttlSeconds") is not None:
            options["ttl"] = cmd["ttlSeconds"]
        if cmd.get("expiresAt") is not None:
            options["expires_at"] = cmd["expiresAt"]
        if cmd.get("closed"):
            options["closed"] = True
        if cmd.get("data") is not None:
            options["body"] = _payload(cmd)
        info = await stream.create(content_type, **options)
        self.content_types[path] = content_type
        return {
            "type": "create",
            "success": True,
            "status": 200 if existed else 201,
            "offset": info.next_offset.token,
        }

    async def connect(self, cmd: dict[str, Any]) -> Result:
        info = await self.stream(cmd["path"], cmd.get("headers")).head()
        if info.content_type:
            self.content_types[cmd["path"]] = info.content_type
        return {
            "type": "connect",
            "success": True,
            "status": 200,
            "offset": info.next_offset.token,
        }

    async def append(self, cmd: dict[str, Any]) -> Result:
        stream = self.stream(cmd["path"], cmd.get("headers"))
        seq = cmd.get("seq")
        offset = await stream.append(
            _payload(cmd),
            content_type=stream.content_type,
            stream_seq=None if seq is None else str(seq),
        )
        return self.sent({"type": "append", "success": True, "status": 200, "offset": offset.token})

    async def read(self, cmd: dict[str, Any]) -> Result:
        path = cmd["path"]
        stream = self.stream(path, cmd.get("headers"))
        live = LIVE_MODES[cmd.get("live")]
        start = cmd.get("offset") or "-1"
        max_chunks = cmd.get("maxChunks") or 100
        wait_for_up_to_date = bool(cmd.get("waitForUpToDate"))
        state: dict[str, Any] = {
            "status": None,
            "offset": start,
            "upToDate": False,
            "streamClosed": False,
        }
        chunks: list[dict[str, Any]] = []
        json_stream = is_json(self.content_types.get(path) or stream.content_type)

        def take(batch: Batch) -> bool:
            """Records one batch; whether the read is over."""
            if state["status"] is None:
                state["status"] = batch.status
            data = _chunk_text(batch, json_stream)
            if data:
                chunks.append({"data": data, "offset": batch.next_offset.token})
            state["offset"] = batch.next_offset.token
            state["upToDate"] = batch.up_to_date
            state["streamClosed"] = batch.closed
            return len(chunks) >= max_chunks or (wait_for_up_to_date and batch.up_to_date)

        async def collect() -> None:
            batches = stream.read(Offset(start), live=live, idle=True)
            try:
                async for batch in batches:
                    if take(batch):
                        return
            finally:
                await batches.aclose()  # type: ignore[attr-defined]

        if live is None:
            await collect()
        else:
            try:
                await asyncio.wait_for(collect(), (cmd.get("timeoutMs") or 5000) / 1000)
            except TimeoutError:
                # A live read that waited its whole time has caught up with the stream.
                state["upToDate"] = True
        return self.sent(
            {
                "type": "read",
                "success": True,
                "status": state["status"] or 200,
                "chunks": chunks,
                "offset": state["offset"],
                "upToDate": state["upToDate"],
                "streamClosed": state["streamClosed"],
            }
        )

    async def head(self, cmd: dict[str, Any]) -> Result:
        info = await self.stream(cmd["path"], cmd.get("headers")).head()
        if info.content_type:
            self.content_types[cmd["path"]] = info.content_type
        result: Result = {
            "type": "head",
            "success": True,
            "status": 200,
            "offset": info.next_offset.token,
            "contentType": info.content_type,
            "streamClosed": info.closed,
        }
        if info.ttl is not None:
            result["ttlSeconds"] = info.ttl
        if info.expires_at is not None:
            result["expiresAt"] = info.expires_at
        return result

    async def delete(self, cmd: dict[str, Any]) -> Result:
        await self.stream(cmd["path"], cmd.get("headers")).delete()
        self.forget(cmd["path"])
        return {"type": "delete", "success": True, "status": 200}

    async def close(self, cmd: dict[str, Any]) -> Result:
        stream = self.stream(cmd["path"])
        final = None if cmd.get("data") is None else _payload(cmd)
        offset = await stream.close(final, content_type=cmd.get("contentType"))
        return {"type": "close", "success": True, "finalOffset": offset.token}

    def producer(
        self, cmd: dict[str, Any], settings: ProducerSettings | None = None
    ) -> IdempotentProducer:
        key = (cmd["path"], cmd["producerId"], int(cmd.get("epoch") or 0))
        producer = self.producers.get(key)
        if producer is None:
            stream = AsyncDurableStream(
                self.url(cmd["path"]),
                client=self.client,
                headers=cmd.get("headers"),
                content_type=self.content_types.get(cmd["path"]),
            )
            settings = settings or ProducerSettings(auto_claim=bool(cmd.get("autoClaim")))
            producer = IdempotentProducer(stream, key[1], epoch=key[2], settings=settings)
            self.producers[key] = producer
        return producer

    async def idempotent_append(self, cmd: dict[str, Any]) -> Result:
        producer = self.producer(cmd)
        await producer.append(await self._value(producer, cmd["data"]))
        offset = await producer.flush()
        result: Result = {"type": "idempotent-append", "success": True, "status": 200}
        if offset is not None:
            result["offset"] = offset.token
        return result

    async def idempotent_append_batch(self, cmd: dict[str, Any]) -> Result:
        in_flight = cmd.get("maxInFlight") or 1
        # Several requests in flight need several batches: one message each.
        settings = ProducerSettings(
            linger=0.0 if in_flight > 1 else 1.0,
            max_batch_bytes=1 if in_flight > 1 else 1024 * 1024,
            max_in_flight=in_flight,
            auto_claim=bool(cmd.get("autoClaim")),
        )
        key = (cmd["path"], cmd["producerId"], int(cmd.get("epoch") or 0))
        self.producers.pop(key, None)
        producer = self.producer(cmd, settings)
        try:
            for item in cmd["items"]:
                await producer.append(await self._value(producer, item))
            await producer.flush()
        finally:
            self.producers.pop(key, None)
            await producer.detach()
        return {"type": "idempotent-append-batch", "success": True, "status": 200}

    async def idempotent_close(self, cmd: dict[str, Any]) -> Result:
        producer = self.producer(cmd)
        final = None if cmd.get("data") is None else await self._value(producer, cmd["data"])
        offset = await producer.close(final)
        result: Result = {"type": "idempotent-close", "success": True, "status": 200}
        if offset is not None:
            result["finalOffset"] = offset.token
        return result

    async def idempotent_detach(self, cmd: dict[str, Any]) -> Result:
        key = (cmd["path"], cmd["producerId"], int(cmd.get("epoch") or 0))
        producer = self.producers.pop(key, None)
        if producer is not None:
            await producer.detach()
        return {"type": "idempotent-detach", "success": True, "status": 200}

    async def _value(self, producer: IdempotentProducer, data: str) -> Any:
        """The suite sends a JSON stream's messages as JSON text."""
        content_type = self.content_types.get(producer.stream.url.removeprefix(self.server_url))
        if content_type is None:
            content_type = (
                producer.stream.content_type or (await producer.stream.head()).content_type
            )
        return json.loads(data) if is_json(content_type) else data

    async def validate(self, cmd: dict[str, Any]) -> Result:
        target = cmd["target"]
        if target.get("target") != "idempotent-producer":
            return _error("validate", "NOT_SUPPORTED", f"no such validation: {target}")
        options: dict[str, Any] = {}
        if target.get("maxBatchBytes") is not None:
            options["max_batch_bytes"] = target["maxBatchBytes"]
        try:
            settings = ProducerSettings(**options)
            stream = AsyncDurableStream(f"{self.server_url}/validate", client=self.client)
            IdempotentProducer(
                stream,
                target.get("producerId", "producer"),
                epoch=target.get("epoch", 0),
                settings=settings,
            )
        except (TypeError, ValueError) as refusal:
            message = str(refusal)
            for ours, theirs in OPTION_NAMES.items():
                message = message.replace(ours, theirs)
            return _error("validate", "INVALID_ARGUMENT", message)
        return {"type": "validate", "success": True}

    async def set_dynamic_header(self, cmd: dict[str, Any]) -> Result:
        self.dynamic_headers[cmd["name"]] = Dynamic(cmd["valueType"], cmd.get("initialValue") or "")
        return {"type": "set-dynamic-header", "success": True}

    async def set_dynamic_param(self, cmd: dict[str, Any]) -> Result:
        self.dynamic_params[cmd["name"]] = Dynamic(cmd["valueType"])
        return {"type": "set-dynamic-param", "success": True}

    async def clear_dynamic(self, cmd: dict[str, Any]) -> Result:
        self.dynamic_headers.clear()
        self.dynamic_params.clear()
        return {"type": "clear-dynamic", "success": True}

    async def benchmark(self, cmd: dict[str, Any]) -> Result:
        operation = cmd["operation"]
        started = time.perf_counter_ns()
        metrics = await self._bench(operation)
        return {
            "type": "benchmark",
            "success": True,
            "iterationId": cmd["iterationId"],
            "durationNs": str(time.perf_counter_ns() - started),
            "metrics": metrics,
        }

    async def _bench(self, op: dict[str, Any]) -> dict[str, Any]:
        kind, path = op["op"], op["path"]
        stream = self.stream(path)
        if kind == "create":
            content_type = op.get("contentType") or "application/octet-stream"
            await stream.create(content_type)
            self.content_types[path] = content_type
            return {}
        if kind == "append":
            await stream.append(b"*" * op["size"], content_type=stream.content_type)
            return {"bytesTransferred": op["size"]}
        if kind in ("read", "throughput_read"):
            start = Offset(op.get("offset") or "-1")
            size = messages = 0
            async for batch in stream.read(start):
                size += len(batch.data)
                messages += len(batch.messages or [])
            return {"bytesTransferred": size, "messagesProcessed": messages}
        if kind == "roundtrip":
            content_type = op.get("contentType") or "application/octet-stream"
            await stream.create(content_type)
            self.content_types[path] = content_type
            payload: Any = (
                [{"data": "x" * op["size"]}] if is_json(content_type) else b"*" * op["size"]
            )
            reader = stream.read(Offset.BEGINNING, live=op.get("live") or "long-poll")
            first = asyncio.ensure_future(reader.__anext__())
            await asyncio.sleep(0.005)
            await stream.append(payload, content_type=content_type)
            batch = await first
            await reader.aclose()  # type: ignore[attr-defined]
            return {"bytesTransferred": op["size"] + len(batch.data)}
        if kind == "throughput_append":
            content_type = self.content_types.get(path) or "application/octet-stream"
            with contextlib.suppress(StreamConflict):
                await stream.create(content_type)
            producer = IdempotentProducer(
                stream, "benchmark", settings=ProducerSettings(max_in_flight=op["concurrency"])
            )
            value: Any = {"data": "*" * op["size"]} if is_json(content_type) else b"*" * op["size"]
            for _ in range(op["count"]):
                await producer.append(value)
            await producer.detach()
            return {"messagesProcessed": op["count"], "bytesTransferred": op["count"] * op["size"]}
        raise ValueError(f"unknown benchmark operation {kind!r}")


# ------------------------------------------------------------------ results


def is_json(content_type: str | None) -> bool:
    return (content_type or "").split(";")[0].strip().lower() == "application/json"


def _payload(cmd: dict[str, Any]) -> bytes:
    data = cmd.get("data") or ""
    return base64.b64decode(data) if cmd.get("binary") else data.encode()


def _chunk_text(batch: Batch, json_stream: bool) -> str:
    if json_stream:
        if not batch.messages:
            return ""
        return json.dumps(batch.messages, separators=(",", ":"), ensure_ascii=False)
    return batch.data.decode("utf-8", errors="replace")


def _error(command_type: str, code: str, message: str, status: int | None = None) -> Result:
    result: Result = {
        "type": "error",
        "success": False,
        "commandType": command_type,
        "errorCode": code,
        "message": message,
    }
    if status is not None:
        result["status"] = status
    return result


def failure(command_type: str, exc: BaseException) -> Result:
    """The suite's error codes for what the client raised."""
    message = str(exc) or type(exc).__name__
    if isinstance(exc, ProducerError):
        reason = exc.lost[0].lost_because or "" if exc.lost else ""
        match = re.match(r"(\d{3}) ", reason)
        status = int(match.group(1)) if match else None
        if status == 409 and "closed" in reason.lower():
            return _error(command_type, "STREAM_CLOSED", message, 409)
        code = "CONFLICT" if status == 409 else "UNEXPECTED_STATUS"
        return _error(command_type, code, message, status)
    if isinstance(exc, DurableStreamError):
        status = exc.status
        if isinstance(exc, StreamNotFound):
            return _error(command_type, "NOT_FOUND", message, status)
        if isinstance(exc, StreamClosed):
            return _error(command_type, "STREAM_CLOSED", message, status)
        if isinstance(exc, SequenceConflict):
            return _error(command_type, "SEQUENCE_CONFLICT", message, status)
        if isinstance(exc, StreamConflict):
            return _error(command_type, "CONFLICT", message, status)
        if isinstance(exc, BadRequest) and status == 400 and command_type == "read":
            return _error(command_type, "INVALID_OFFSET", message, status)
        if status is None and isinstance(exc, Unavailable | OutcomeUnknown):
            return _error(command_type, "NETWORK_ERROR", message)
        return _error(command_type, "UNEXPECTED_STATUS", message, status)
    if isinstance(exc, httpx.TimeoutException):
        return _error(command_type, "TIMEOUT", message)
    if isinstance(exc, httpx.TransportError):
        return _error(command_type, "NETWORK_ERROR", message)
    if isinstance(exc, json.JSONDecodeError | UnicodeDecodeError | binascii.Error | KeyError):
        return _error(command_type, "PARSE_ERROR", message)
    if isinstance(exc, TypeError | ValueError):
        return _error(command_type, "INVALID_ARGUMENT", message)
    return _error(command_type, "INTERNAL_ERROR", f"{type(exc).__name__}: {message}")


async def serve(lines: Callable[[], Awaitable[str]], write: Callable[[str], None]) -> None:
    adapter = Adapter()
    handlers: dict[str, Callable[[dict[str, Any]], Awaitable[Result]]] = {
        "init": adapter.init,
        "create": adapter.create,
        "connect": adapter.connect,
        "append": adapter.append,
        "read": adapter.read,
        "head": adapter.head,
        "delete": adapter.delete,
        "close": adapter.close,
        "idempotent-append": adapter.idempotent_append,
        "idempotent-append-batch": adapter.idempotent_append_batch,
        "idempotent-close": adapter.idempotent_close,
        "idempotent-detach": adapter.idempotent_detach,
        "validate": adapter.validate,
        "set-dynamic-header": adapter.set_dynamic_header,
        "set-dynamic-param": adapter.set_dynamic_param,
        "clear-dynamic": adapter.clear_dynamic,
        "benchmark": adapter.benchmark,
    }
    while line := await lines():
        if not line.strip():
            continue
        cmd = json.loads(line)
        kind = cmd.get("type", "")
        if kind == "shutdown":
            write(json.dumps({"type": "shutdown", "success": True}))
            break
        handler = handlers.get(kind)
        try:
            if handler is None:
                result = _error(kind, "NOT_SUPPORTED", f"unknown command {kind!r}")
            else:
                result = await handler(cmd)
        except Exception as exc:  # every failure is an answer to the suite, not a crash
            result = failure(kind, exc)
        write(json.dumps(result))
    await adapter.client.aclose()


def main() -> None:
    loop_reader = sys.stdin.readline

    async def lines() -> str:
        return await asyncio.get_running_loop().run_in_executor(None, loop_reader)

    def write(text: str) -> None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    asyncio.run(serve(lines, write))


if __name__ == "__main__":
    main()
