"""The browser console (docs/console.md): a page served by the origin at `console_path`, which
shows and works with streams through the protocol itself, and reads what the protocol does not
show (a listing with metadata, producers, the store's figures, subscriptions' internals) from
a small JSON API of its own beside it."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from ..telemetry import Telemetry
from ._api import Admit, ConsoleParts, ReadBearer, add_console_routes
from ._assets import CSP, ConsoleAssets, page_csp
from ._rates import CloudWatchRates, RateRecorder, RateSource, RecordingTelemetry


def recording(telemetry: Telemetry | None) -> tuple[RateRecorder, Telemetry]:
    """A recorder of the overview's rates, and `telemetry` feeding it as well."""
    recorder = RateRecorder()
    return recorder, RecordingTelemetry(recorder, telemetry)


def add_console(
    app: FastAPI,
    settings: Any,
    store: Any,
    admit: Admit,
    bearer: ReadBearer | None,
    rates: RateSource,
    subscriptions: Any | None,
) -> None:
    parts = ConsoleParts(settings, store, admit, bearer, rates, subscriptions)
    add_console_routes(app, parts, ConsoleAssets.packaged())


__all__ = [
    "CSP",
    "CloudWatchRates",
    "ConsoleAssets",
    "RateRecorder",
    "RateSource",
    "add_console",
    "page_csp",
    "recording",
]
