"""Names a package exports but loads only on first use (a module `__getattr__`, PEP 562): the
API function imports these packages on every cold start and never uses some of their parts."""

from collections.abc import Callable
from importlib import import_module
from typing import Any


def lazy_exports(package: str, modules: dict[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package` that imports `package.<modules[name]>` the first
    time `name` is asked for, and returns its `name`."""

    def __getattr__(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(f"{package}.{module}"), name)

    return __getattr__
