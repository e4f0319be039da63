"""AWS clients (botocore) with deadlines and retries, and the classification of AWS errors."""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import botocore.loaders
import botocore.session
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionError,
    DataNotFoundError,
    ReadTimeoutError,
)

from ._item_parsing import ItemParserFactory
from .model import StoreUnavailable

_THROTTLING_CODES = {
    "ThrottlingException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "SlowDown",
    "InternalServerError",
    "ServiceUnavailable",
    "LimitExceededException",
}


@dataclass(frozen=True)
class AwsSettings:
    region: str | None = None
    dynamodb_endpoint: str | None = None
    s3_endpoint: str | None = None
    connect_timeout: float = 2.0
    read_timeout: float = 5.0
    max_attempts: int = 4
    # For the embedded emulator (`dsaws serve`), never AWS: DynamoDB requests go unsigned
    # (`_label_for_moto`), their parameters unchecked by botocore before they leave, and with
    # a fixed User-Agent (botocore's own is rebuilt twice per request, character by
    # character): about 0.3 ms of each append. The store's calls are checked where the tests
    # run them, with signed and checked clients; here a mistyped parameter is refused by moto
    # or, for a name the operation lacks, by botocore's serialiser (a KeyError).
    lean_emulator_dynamodb: bool = False


_EMULATOR_USER_AGENT = "durable-streams-aws (embedded emulator)"
# moto routes a request to a service, an account and a region by the credential scope of its
# signature, and checks nothing else of it. The access key is one moto maps to its default
# account, as it does the emulator's credentials.
_MOTO_SCOPE = (
    "AWS4-HMAC-SHA256 Credential=unsigned/20000101/{region}/{service}/aws4_request, "
    "SignedHeaders=host, Signature=unsigned"
)


def _label_for_moto(request: Any, region_name: str, signing_name: str, **_: Any) -> None:
    """A `before-sign` handler of an unsigned client: the request carries the scope it would
    have been signed with (set anew on each attempt, as a signature is)."""
    if "Authorization" in request.headers:
        del request.headers["Authorization"]
    request.headers["Authorization"] = _MOTO_SCOPE.format(region=region_name, service=signing_name)


def _number_the_invocation(context: dict[str, Any], **_: Any) -> None:
    """A `before-call` handler of the lean client: its invocation id (sent in a header moto
    ignores) from a counter, where botocore would spend a uuid4 (a system call) per call."""
    context.setdefault("retries", {})["invocation-id"] = request_token()


_LOADER: botocore.loaders.Loader | None = None


_SERVICE_NAME = re.compile(r"[a-z0-9][a-z0-9.-]*")


class _ServiceNames:
    """The services a loader knows, as `Loader.list_available_services` answers them, but
    asked one name at a time: is this service's directory there, with a model of the kind?"""

    def __init__(self, loader: _Loader, type_name: str) -> None:
        self._loader = loader
        self._type_name = type_name

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str) or _SERVICE_NAME.fullmatch(name) is None:
            return False
        try:
            return bool(self._loader.list_api_versions(name, self._type_name))
        except DataNotFoundError:
            return False

    def _all(self) -> list[str]:
        return botocore.loaders.Loader.list_available_services(self._loader, self._type_name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


class _PlainJsonFiles(botocore.loaders.JSONFileLoader):
    """botocore's model files parsed into plain dicts (which keep their order as well) rather
    than OrderedDicts: the largest, the 1.2 MB endpoints.json read by every cold start, takes
    7 ms instead of 18."""

    def _load_file(self, full_path: str, open_method: Callable[..., Any]) -> Any:
        if not os.path.isfile(full_path):
            return None
        with open_method(full_path, "rb") as file:
            return json.loads(file.read().decode("utf-8"))


class _Loader(botocore.loaders.Loader):
    """botocore's loader, except for one check. Before it loads a service's model, botocore
    makes sure the service exists by listing every service directory it has (over 400) and
    looking inside each, once per kind of model: some 16 ms of each cold start, to answer a
    question about one directory. Here that question is asked of that directory."""

    def list_available_services(self, type_name: str) -> Any:
        return _ServiceNames(self, type_name)


def _shared_loader() -> botocore.loaders.Loader:
    """One loader per process, so the service models (JSON of several MB) are parsed once
    however many stores are built (a test run builds hundreds); credentials and everything
    else still come from a session of each store's own."""
    global _LOADER
    if _LOADER is None:
        _LOADER = _Loader(file_loader=_PlainJsonFiles())
    return _LOADER


def make_clients(settings: AwsSettings) -> tuple[Any, Any]:
    """DynamoDB and S3 clients; botocore's standard mode retries throttling and 5xx."""
    config = Config(
        connect_timeout=settings.connect_timeout,
        read_timeout=settings.read_timeout,
        retries={"mode": "standard", "max_attempts": settings.max_attempts},
        max_pool_connections=64,
    )
    # botocore directly: boto3's S3 extras (s3transfer and its managers) cost import time on
    # every cold start and nothing here uses them.
    session = botocore.session.get_session()
    session.register_component("data_loader", _shared_loader())
    session.register_component("response_parser_factory", ItemParserFactory())
    dynamodb_config = config
    if settings.lean_emulator_dynamodb:
        dynamodb_config = config.merge(
            Config(
                signature_version=UNSIGNED,
                parameter_validation=False,
                user_agent=_EMULATOR_USER_AGENT,
            )
        )
    dynamodb = session.create_client(
        "dynamodb",
        region_name=settings.region,
        endpoint_url=settings.dynamodb_endpoint,
        config=dynamodb_config,
    )
    if settings.lean_emulator_dynamodb:
        dynamodb.meta.events.register("before-sign.dynamodb", _label_for_moto)
        dynamodb.meta.events.register("before-call.dynamodb", _number_the_invocation)
    s3 = LazyClient(
        lambda: session.create_client(
            "s3", region_name=settings.region, endpoint_url=settings.s3_endpoint, config=config
        )
    )
    return dynamodb, s3


class LazyClient:
    """A botocore client made when it is first used. S3's is: its model and endpoint rules
    take some 50 ms to load, and most requests (small appends, reads of data not yet sealed)
    never call S3, so a cold start without SnapStart need not wait for it."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make
        self._client: Any = None
        self._lock = threading.Lock()
        self._setup: list[Callable[[Any], object]] = []

    @property
    def made(self) -> bool:
        return self._client is not None

    def resolve(self) -> Any:
        """The client, made now if it was not yet."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    client = self._make()
                    for setup in self._setup:
                        setup(client)
                    self._client = client
        return self._client

    def when_made(self, setup: Callable[[Any], object]) -> None:
        """Run `setup` on the client once it is made (now, if it is)."""
        with self._lock:
            if self._client is None:
                self._setup.append(setup)
                return
        setup(self._client)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # our own, before __init__ ran (a copy): never the client's
            raise AttributeError(name)
        return getattr(self.resolve(), name)


def when_made(client: Any, setup: Callable[[Any], object]) -> None:
    """Run `setup` on a client (a lazy one: once it is made), registering event handlers
    without making a lazy client early."""
    if isinstance(client, LazyClient):
        client.when_made(setup)
    else:
        setup(client)


_TOKEN_PREFIX = os.urandom(8).hex()
_TOKEN_NUMBERS = itertools.count()


def request_token() -> str:
    """A ClientRequestToken no other request of any process ever carries: this process's
    random prefix and a counter (36 characters at most, as DynamoDB requires), with none of
    uuid4's system call per request."""
    return f"{_TOKEN_PREFIX}{next(_TOKEN_NUMBERS):016x}"


class Conflict(Exception):
    """A conditional write lost a race: re-read and decide again. Where the request asked for
    them (`ReturnValuesOnConditionCheckFailure`), it carries what the failed conditions saw:
    `reasons` has one entry per action of a transaction (its code, and the item as it was),
    `item` the item a single write found."""

    def __init__(
        self,
        *args: object,
        reasons: list[dict[str, Any]] | None = None,
        item: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(*args)
        self.reasons = list(reasons or [])
        self.item = item

    def failed(self, index: int) -> bool:
        """Whether the transaction's action at `index` is one whose condition failed."""
        if index >= len(self.reasons):
            return False
        return self.reasons[index].get("Code") == "ConditionalCheckFailed"

    def found(self, index: int) -> dict[str, Any] | None:
        """The item action `index` found when its condition failed (None: absent or unknown)."""
        if index >= len(self.reasons):
            return None
        item = self.reasons[index].get("Item")
        return dict(item) if item else None


def call(operation: Callable[..., Any], **kwargs: Any) -> Any:
    """One AWS call, with its failures sorted: a lost race raises Conflict; throttling, 5xx and
    transport errors that outlived botocore's retries raise StoreUnavailable."""
    try:
        return operation(**kwargs)
    except ClientError as exc:
        if is_condition_failure(exc):
            reasons = exc.response.get("CancellationReasons") or []
            raise Conflict(reasons=list(reasons), item=exc.response.get("Item")) from exc
        if is_unavailable(exc):
            raise StoreUnavailable(str(exc)) from exc
        raise
    except BotoCoreError as exc:
        raise StoreUnavailable(str(exc)) from exc


def pages(operation: Callable[..., Any], request: dict[str, Any]) -> Iterator[list[Any]]:
    """The items of a paged read (Query, Scan), one page at a time, each read when needed."""
    request = dict(request)
    while True:
        response = call(operation, **request)
        yield response.get("Items", [])
        last = response.get("LastEvaluatedKey")
        if not last:
            return
        request["ExclusiveStartKey"] = last


def each_item(operation: Callable[..., Any], request: dict[str, Any]) -> Iterator[Any]:
    for page in pages(operation, request):
        yield from page


# Calls of one BatchWriteItem batch while DynamoDB leaves items unprocessed.
_BATCH_ATTEMPTS = 6


def delete_items(
    dynamodb: Any, table: str, keys: list[dict[str, Any]], sleep: Callable[[float], None]
) -> int:
    """Delete the items, 25 to a BatchWriteItem; what DynamoDB leaves unprocessed (throttled)
    is sent again after a growing pause, and after a few tries StoreUnavailable leaves the rest
    to the caller's next run."""
    for start in range(0, len(keys), 25):
        batch = {table: [{"DeleteRequest": {"Key": key}} for key in keys[start : start + 25]]}
        for attempt in range(_BATCH_ATTEMPTS):
            if attempt:
                sleep(min(2.0, 0.05 * 2**attempt) * random.uniform(0.5, 1))
            response = call(dynamodb.batch_write_item, RequestItems=batch)
            batch = response.get("UnprocessedItems") or {}
            if not batch:
                break
        else:
            raise StoreUnavailable("items left unprocessed; the next run deletes them")
    return len(keys)


def is_throttle_code(code: object) -> bool:
    return code in _THROTTLING_CODES


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def is_condition_failure(exc: ClientError) -> bool:
    """A conditional write lost a race: re-read and decide again."""
    code = error_code(exc)
    if code == "ConditionalCheckFailedException":
        return True
    if code == "TransactionCanceledException":
        reasons = [r.get("Code") for r in exc.response.get("CancellationReasons", []) or []]
        if not reasons:
            return "ConditionalCheckFailed" in str(exc) or "TransactionConflict" in str(exc)
        retryable = {"ConditionalCheckFailed", "TransactionConflict", "None", None}
        return all(r in retryable for r in reasons) and any(
            r in {"ConditionalCheckFailed", "TransactionConflict"} for r in reasons
        )
    return code == "TransactionConflictException"


def is_unavailable(exc: BaseException) -> bool:
    """Throttling, 5xx or a transport failure that survived botocore's retries."""
    if isinstance(exc, ClientError):
        code = error_code(exc)
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        if code == "TransactionCanceledException":
            reasons = [r.get("Code") for r in exc.response.get("CancellationReasons", []) or []]
            return "ThrottlingError" in reasons
        return code in _THROTTLING_CODES or int(status or 0) >= 500
    return isinstance(exc, ConnectionError | ReadTimeoutError | BotoCoreError)
