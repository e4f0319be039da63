"""Building the subscription service from the settings: its keys, its scheduler, its sender."""

from __future__ import annotations

import json
import logging
import secrets
import threading
from functools import cached_property
from typing import Any

from ..config import SubscriptionSettings
from ..protocol.append import AppendIntent
from ..protocol.headers import JSON_MEDIA_TYPE
from ..storage import DynamoStore, Payload, StreamPage
from ..telemetry import Telemetry
from ._tokens import TokenSigner, derive_token_key
from .ports import Keys, Sent
from .service import Subscriptions
from .store import SubscriptionStore
from .tasks import InProcessScheduler, Scheduler, SqsScheduler

logger = logging.getLogger("dsaws.subscriptions")


class StreamAccess:
    """The subscriptions' `StreamPort` on the stream store: a listing for backfill, and
    appending wake events (straight to the store: a wake event wakes no subscription itself)."""

    def __init__(self, store: DynamoStore) -> None:
        self.store = store

    def list_streams(self, prefix: str, cursor: str | None, page_items: int) -> StreamPage:
        return self.store.list_streams(prefix, cursor, page_items)

    def append_json(self, path: str, event: dict[str, Any]) -> bool:
        data = json.dumps(event, separators=(",", ":")).encode()
        intent = AppendIntent(JSON_MEDIA_TYPE, has_body=True, close=False)
        outcome = self.store.append(path, intent, Payload(data, (len(data),)))
        return outcome.decision is not None and outcome.decision.commits


class LazyKeys:
    """The keys, read on first use (a Secrets Manager read stays off the cold start)."""

    def __init__(self, settings: SubscriptionSettings) -> None:
        self.settings = settings

    @cached_property
    def keys(self) -> Keys:
        text = self.settings.webhook_secret
        if text is None and self.settings.webhook_secret_id is not None:
            import boto3

            client = boto3.client("secretsmanager", region_name=self.settings.region)
            secret = client.get_secret_value(SecretId=self.settings.webhook_secret_id)
            text = secret["SecretString"]
        if text is None:
            logger.warning("no webhook secret configured: signing with a key of this process")
            text = secrets.token_urlsafe(32)
        from ._signing import SigningKey  # cryptography: loaded when a key is first needed

        signing = SigningKey.from_secret_text(text)
        return Keys(signing, TokenSigner(derive_token_key(signing.seed)))


class ConfiguredSubscriptions(Subscriptions):
    """The service with its keys loaded lazily and, without a queue, an in-process timer
    thread started on first use."""

    def __init__(
        self,
        settings: SubscriptionSettings,
        store: DynamoStore,
        telemetry: Telemetry | None = None,
    ) -> None:
        self._lazy_keys = LazyKeys(settings)
        scheduler: Scheduler
        self._local: InProcessScheduler | None = None
        if settings.queue_url:
            import boto3

            sqs = boto3.client("sqs", region_name=settings.region)
            scheduler = SqsScheduler(sqs, settings.queue_url)
        else:
            self._local = InProcessScheduler(self.run, settings.sweep_seconds)
            self._local.on_sweep = self.sweep
            scheduler = _Starting(self._local)
        super().__init__(
            SubscriptionStore(store.dynamodb, store.table, store.settle),
            StreamAccess(store),
            lambda: self._lazy_keys.keys,
            scheduler,
            _LazySender(settings.webhook_localhost_allowed),
            telemetry=telemetry,
        )

    def stop(self) -> None:
        if self._local is not None:
            self._local.stop()


class _LazySender:
    """The webhook sender, built on the first webhook: the API function, which only queues
    tasks, never loads httpx's async stack for it."""

    def __init__(self, allow_local_http: bool) -> None:
        self.allow_local_http = allow_local_http
        self._sender: Any = None

    def __call__(self, url: str, body: bytes, headers: dict[str, str], timeout: float) -> Sent:
        if self._sender is None:
            from .webhooks import WebhookSender

            self._sender = WebhookSender(allow_local_http=self.allow_local_http)
        return self._sender(url, body, headers, timeout)  # type: ignore[no-any-return]


class _Starting:
    """Starts the in-process scheduler's thread with the first task: apps that never see a
    subscription never start one."""

    def __init__(self, scheduler: InProcessScheduler) -> None:
        self.scheduler = scheduler
        self._start = threading.Lock()
        self.started = False

    def send(self, task: Any, delay: float = 0.0) -> None:
        with self._start:
            if not self.started:
                self.started = True
                self.scheduler.start()
        self.scheduler.send(task, delay)
