"""The embedded S3 + DynamoDB emulator: moto's server behind one global lock.

moto's DynamoDB is not thread-safe: two concurrent conditional writes can both succeed. Serving
every request under one lock makes it linearizable, which the store's correctness relies on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server


class _QuietHandler(WSGIRequestHandler):
    disable_nagle_algorithm = True  # see infra.lambda_bridge: no delayed-ACK stalls

    def log_request(self, *args: Any, **kwargs: Any) -> None:
        pass


class _LockedApp:
    def __init__(self, app: Any) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        with self.lock:
            # Materialise the body inside the lock: moto builds it lazily in some paths.
            return list(self.app(environ, start_response))


class Emulator:
    """A moto server on a loopback port, in a background thread of this process."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        middleware: Callable[[Any], Any] | None = None,
    ) -> None:
        """`middleware`, if given, wraps the WSGI app (benchmarks count calls with it)."""
        from moto.server import DomainDispatcherApplication, create_backend_app

        from . import _moto_transactions

        _moto_transactions.install()
        app = _LockedApp(DomainDispatcherApplication(create_backend_app))
        if middleware is not None:
            app = middleware(app)
        self._server: BaseWSGIServer = make_server(
            host, port, app, threaded=True, request_handler=_QuietHandler
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://{self._server.host}:{self._server.port}"

    def start(self) -> Emulator:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
