"""The embedded emulator's patches of moto: where moto is slow for the store's requests, code
that answers as moto does, installed process-wide from one registry (`PATCHES`), and only on
the moto versions they were tested with (`TESTED_MOTO`).

One module a patch, each with `install()` and `uninstall()`; `_condition_builder` is no patch
but serves `_item_requests`. Importing this package imports none of moto's internals: the
patch modules are imported when installed."""

from ._registry import (
    PATCHES,
    TESTED_MOTO,
    MotoPatch,
    UntestedMotoVersion,
    install_patches,
    installed_moto_version,
    patch_moto,
    uninstall_patches,
)
from ._versions import VersionRange

__all__ = [
    "PATCHES",
    "TESTED_MOTO",
    "MotoPatch",
    "UntestedMotoVersion",
    "VersionRange",
    "install_patches",
    "installed_moto_version",
    "patch_moto",
    "uninstall_patches",
]
