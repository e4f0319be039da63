"""The subscription service: one object for its three callers, each served by a part of its
own, over one store and one set of ports.

- The control API (`core.http.subscriptions`): `create`, `describe`, `remove`,
  `add_streams`, `remove_stream` (`_control`), and the wake requests, `authorize`,
  `complete`, `claim`, `release` (`_wake_requests`).
- The append path: `changed` and `unconcerned` (`_appends`).
- The delivery worker (`functions.subscriptions`, or the in-process scheduler): `run`,
  `notice`, `check`, `deliver`, `expire`, `sweep`, `resume` (`_delivery`).

Every operation reads the subscription, decides with `rules`, and writes the decision with a
condition on the version it read, re-reading after a lost race (`_retry`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence

from ..telemetry import NoTelemetry, Telemetry
from ._appends import AppendNotices
from ._context import Context
from ._control import Control, Creation
from ._delivery import DeliveryWorker
from ._issuing import WakeIssuer
from ._linking import Linker
from ._wake_requests import AuthorizedWake, Claim, WakeRequests
from .model import Completion, Delivery, LinkStatus, Subscription, SubscriptionConfig, WakeFence
from .ports import Keys, StreamPort, WebhookPost
from .store import SubscriptionStore
from .tasks import Scheduler, Task


class Subscriptions:
    def __init__(
        self,
        store: SubscriptionStore,
        streams: StreamPort,
        keys: Callable[[], Keys],
        scheduler: Scheduler,
        post: WebhookPost,
        clock: Callable[[], float] = time.time,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.context = Context(
            store, streams, keys, scheduler, post, clock, telemetry or NoTelemetry()
        )
        linker = Linker(self.context)
        issuer = WakeIssuer(self.context)
        self.appends = AppendNotices(self.context)
        self.control = Control(self.context, linker, self.appends.forget)
        self.delivery = DeliveryWorker(self.context, linker, issuer)
        self.wakes = WakeRequests(self.context, issuer)

    @property
    def store(self) -> SubscriptionStore:
        return self.context.store

    @property
    def scheduler(self) -> Scheduler:
        return self.context.scheduler

    @property
    def keys(self) -> Keys:
        return self.context.keys

    # ---------------------------------------------------------------- control API

    def create(
        self, subscription_id: str, config: SubscriptionConfig, public_root: str
    ) -> tuple[Creation, Subscription]:
        return self.control.create(subscription_id, config, public_root)

    def describe(self, subscription_id: str) -> tuple[Subscription, tuple[LinkStatus, ...]]:
        return self.control.describe(subscription_id)

    def remove(self, subscription_id: str) -> None:
        self.control.remove(subscription_id)

    def add_streams(self, subscription_id: str, paths: tuple[str, ...]) -> None:
        self.control.add_streams(subscription_id, paths)

    def remove_stream(self, subscription_id: str, path: str) -> None:
        self.control.remove_stream(subscription_id, path)

    # ---------------------------------------------------------------- wake requests

    def authorize(
        self, subscription_id: str, token: str | None, fence: WakeFence
    ) -> AuthorizedWake:
        return self.wakes.authorize(subscription_id, token, fence)

    def complete(
        self, wake: AuthorizedWake, completion: Completion, delivery: Delivery | None = None
    ) -> bool:
        return self.wakes.complete(wake, completion, delivery)

    def claim(self, subscription_id: str, worker: str) -> Claim:
        return self.wakes.claim(subscription_id, worker)

    def release(self, wake: AuthorizedWake) -> None:
        self.wakes.release(wake)

    # ---------------------------------------------------------------- append path

    def changed(self, path: str) -> None:
        self.appends.changed(path)

    def unconcerned(self, path: str) -> bool:
        return self.appends.unconcerned(path)

    # ---------------------------------------------------------------- delivery worker

    def run(self, tasks: Sequence[Task]) -> list[Task]:
        return self.delivery.run(tasks)

    def notice(self, paths: Iterable[str]) -> bool:
        return self.delivery.notice(paths)

    def check(self, subscription_id: str) -> None:
        self.delivery.check(subscription_id)

    def deliver(self, subscription_id: str, generation: int) -> None:
        self.delivery.deliver(subscription_id, generation)

    def expire(self, subscription_id: str, generation: int, lease_end: float | None) -> None:
        self.delivery.expire(subscription_id, generation, lease_end)

    def sweep(self) -> None:
        self.delivery.sweep()

    def resume(self) -> None:
        self.delivery.resume()


__all__ = ["AuthorizedWake", "Claim", "Creation", "Subscriptions"]
