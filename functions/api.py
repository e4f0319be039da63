"""The API function: the FastAPI app behind Mangum, configured by `DS_` variables.

Powertools gives structured JSON logs (with the request id), EMF metrics and, when
`DS_TRACING=true`, X-Ray tracing. Inside Lambda the server answers SSE in bounded-window mode by
itself (see `core.config.Settings.sse_mode`). The init also does what a first request would do
once, and registers the SnapStart hooks (`functions._snapstart`).
"""

# ruff: noqa: E402 (the garbage collector is paused before the imports: see below)
from __future__ import annotations

import gc

# The init (these imports, the clients, the app, the warm-up) makes some 120,000
# objects that live as long as the process, and under 1,000 of garbage; yet the collections
# their allocation sets off scan them over and over: some 50 ms of each cold start. The
# collector is paused until the init ends; then what the init made is frozen, left out of
# every later collection (here, and in every instance restored from a snapshot of this one).
gc.disable()

import os
from typing import Any

from aws_lambda_powertools import Logger
from mangum import Mangum

from durable_streams_aws.core.config import load_settings
from durable_streams_aws.core.http.envelope import TEXT_MIME_TYPES
from durable_streams_aws.core.runtime import build_backend

from . import _snapstart
from ._metrics import SERVICE, PowertoolsTelemetry, metrics

logger = Logger(service=SERVICE)

try:
    # Settings that cannot work here fail the function's initialisation with a readable
    # message.
    _telemetry = PowertoolsTelemetry()
    _backend = build_backend(load_settings(), telemetry=_telemetry)
    _app = _backend.app(access_log=logger)
    _asgi = Mangum(_app, lifespan="off", text_mime_types=list(TEXT_MIME_TYPES))
    with _telemetry.silenced():  # the warm-up's requests are not traffic
        _snapstart.warm_up(_asgi, _backend, _app)
    _snapstart.register_hooks(_backend)
finally:  # collection resumes even after a failed init, in a process that outlives it
    gc.freeze()
    gc.enable()


def _traced(function: Any) -> Any:
    if os.environ.get("DS_TRACING", "").lower() != "true":
        return function
    from aws_lambda_powertools import Tracer  # needs aws-lambda-powertools[tracer]

    tracer = Tracer(service=SERVICE, patch_modules=["boto3", "botocore"])
    return tracer.capture_lambda_handler(function)


@_traced
@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return _asgi(event, context)
