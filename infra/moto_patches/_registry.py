"""Every patch of moto the embedded emulator installs, what each replaces and why, and the one
place they are installed from.

The patches rebind moto's internals (private ones included), process-wide: a moto release may
rename or change any of them. So they are installed only on the moto versions they were tested
with (`TESTED_MOTO`); on any other, the emulator warns once and runs moto as it is: correct,
and slower. The patch modules are imported only once the version is known to be tested, as
they import moto's internals by name.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ._versions import VersionRange

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

# The moto versions the patches were tested with (the suite passed on 5.2.1). On a new
# release: run the tests each patch names, then widen this range.
TESTED_MOTO = VersionRange(lowest=(5, 2, 1), below=(5, 3))


class UntestedMotoVersion(UserWarning):
    """moto's version is outside `TESTED_MOTO`: the emulator runs without its patches."""


@dataclass(frozen=True)
class MotoPatch:
    """One patch: its module in this package, whose `install()` rebinds exactly the names in
    `replaces` and whose `uninstall()` puts moto's own objects back."""

    module: str
    # What `install` rebinds, each as "module:attribute.path": moto's own functions and
    # methods, or, for a layer in front of moto's app, the switch that turns it on.
    replaces: tuple[str, ...]
    why: str
    # The tests that check the patched moto answers as moto does, each "file::test".
    checked_by: tuple[str, ...]

    @property
    def installer(self) -> str:
        """The dotted name of the function that installs the patch."""
        return f"{__package__}.{self.module}.install"

    def bound(self) -> tuple[object, ...]:
        """What each name in `replaces` is bound to now."""
        return tuple(_resolve(name) for name in self.replaces)

    def install(self) -> None:
        self._imported().install()

    def uninstall(self) -> None:
        self._imported().uninstall()

    def _imported(self) -> Any:
        return importlib.import_module(f"{__package__}.{self.module}")


def _resolve(name: str) -> object:
    module, _, path = name.partition(":")
    found: object = importlib.import_module(module)
    for attribute in path.split("."):
        found = getattr(found, attribute)
    return found


_FAST_PATHS = "tests/integration/test_emulator_fast_paths.py"
_ITEM_REQUESTS = "tests/integration/test_emulator_item_requests.py"

# In the order they are installed.
PATCHES: tuple[MotoPatch, ...] = (
    MotoPatch(
        module="_transactions",
        replaces=("moto.dynamodb.models:DynamoDBBackend.transact_write_items",),
        why="moto deep-copies every table a transaction touches: each append costs O(table)",
        checked_by=(
            "tests/integration/test_emulator.py::test_a_write_failing_after_others_rolls_them_all_back",
            "tests/integration/test_emulator.py::test_an_invalid_update_in_a_transaction_changes_nothing",
        ),
    ),
    MotoPatch(
        module="_serialize",
        replaces=(
            "moto.dynamodb.responses:DynamoResult.execute_result",
            "moto.core.responses:BaseResponse._enrich_response",
        ),
        why="moto's shape-walking serialiser was most of a catch-up read's time",
        checked_by=(f"{_FAST_PATHS}::test_item_operations_answer_as_moto_does",),
    ),
    MotoPatch(
        module="_query",
        replaces=("moto.dynamodb.models.table:Table.query",),
        why="moto's Query walks every item of the table, not the one partition, and copies "
        "and converts each whole item it projects",
        checked_by=(
            f"{_FAST_PATHS}::test_query_pages_are_moto_s",
            f"{_FAST_PATHS}::test_query_pages_stay_moto_s_as_items_come_go_and_change",
            f"{_FAST_PATHS}::test_paging_through_a_partition_sorts_it_once_and_copies_no_item_whole",
            f"{_FAST_PATHS}::test_a_query_stops_at_a_megabyte_as_moto_does",
            f"{_FAST_PATHS}::test_number_sort_keys_and_indexes_go_to_moto",
            f"{_FAST_PATHS}::test_the_store_s_queries_are_answered_by_the_fast_layer",
        ),
    ),
    MotoPatch(
        module="_scan",
        replaces=("moto.dynamodb.models.table:Table.scan",),
        why="moto's Scan sorts the whole table and walks it from the start for every page, and "
        "copies every item it reads before the filter",
        checked_by=(
            f"{_FAST_PATHS}::test_scan_pages_are_moto_s",
            f"{_FAST_PATHS}::test_scan_pages_stay_moto_s_as_items_come_and_go",
            f"{_FAST_PATHS}::test_a_scan_page_copies_only_what_its_filter_keeps",
        ),
    ),
    MotoPatch(
        module="_condition_cache",
        replaces=(
            "moto.dynamodb.comparisons:ConditionExpressionParser._lex_condition_expression",
            "moto.dynamodb.comparisons:ConditionExpressionParser.parse",
        ),
        why="moto lexes and parses the same few condition expressions twice a write",
        checked_by=(
            f"{_FAST_PATHS}::test_a_cached_condition_does_not_change_with_a_stored_item",
            f"{_FAST_PATHS}::test_item_operations_answer_as_moto_does",
        ),
    ),
    MotoPatch(
        module="_dispatch",
        replaces=(
            "moto.backends:list_of_moto_modules",
            "moto.core.responses:method_names_from_class",
            "moto.core.responses:gen_amzn_requestid_long",
            "moto.utilities.aws_headers:gen_amzn_requestid_long",
        ),
        why="moto lists its package, inspects a class and draws a request id per request",
        checked_by=(
            f"{_FAST_PATHS}::test_request_ids_have_moto_s_form",
            f"{_FAST_PATHS}::test_item_operations_answer_as_moto_does",
        ),
    ),
    MotoPatch(
        module="_item_requests",
        replaces=(f"{__package__}._item_requests:_enabled",),
        why="moto's web stack spent about 2 ms on each of the store's item requests, and "
        "converted every item of a Query twice",
        checked_by=(
            f"{_ITEM_REQUESTS}::test_answers_and_items_are_moto_s",
            f"{_ITEM_REQUESTS}::test_bodies_are_byte_for_byte_moto_s",
            f"{_FAST_PATHS}::test_the_store_s_queries_are_answered_by_the_fast_layer",
            f"{_FAST_PATHS}::test_a_query_s_body_is_byte_for_byte_moto_s",
        ),
    ),
)

_warned = False


def installed_moto_version() -> str:
    return importlib.metadata.version("moto")


def install_patches() -> bool:
    """Install every patch if moto's version is one they were tested with; whether it did.
    Installing again changes nothing. On another version nothing is installed, and the first
    call warns (`UntestedMotoVersion`)."""
    global _warned
    version = installed_moto_version()
    if version not in TESTED_MOTO:
        if not _warned:
            _warned = True
            warnings.warn(
                f"moto {version} is not a version the embedded emulator's patches were tested "
                f"with ({TESTED_MOTO}): running moto unpatched, correct but slower",
                UntestedMotoVersion,
                stacklevel=2,
            )
        return False
    for patch in PATCHES:
        patch.install()
    return True


def uninstall_patches() -> None:
    """Put moto's own objects back in place of every patch. On an untested moto version, where
    `install_patches` installs none (and the patch modules might not import), does nothing."""
    if installed_moto_version() not in TESTED_MOTO:
        return
    for patch in reversed(PATCHES):
        patch.uninstall()


def patch_moto(moto_app: WsgiApp) -> WsgiApp:
    """Install the patches and return moto's WSGI app with the layer that answers the store's
    item requests in front of it; on an untested moto version, moto's app as it is."""
    if not install_patches():
        return moto_app
    from ._item_requests import FastItemRequests

    return FastItemRequests(moto_app)
