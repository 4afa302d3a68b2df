"""Packages whose public names live in their modules and are imported on first use (PEP 562): ``from
builders.release import write_readme`` loads ``builders.release.card`` only."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, str],
                 namespace: dict[str, Any]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of ``package``, whose public name ``n`` is defined in its
    module ``exports[n]``; a name is imported once, then kept in ``namespace`` (the package's ``globals()``)."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
