"""Lazy public names: a package lists ``name -> (module, attribute)`` and imports the module on
first use, so ``import spanassert`` stays cheap and the SDK loads only when needed."""
from __future__ import annotations

import importlib
import sys
from typing import Any, Callable, Dict, Tuple


def lazy_exports(package: str, table: Dict[str, Tuple[str, str]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` resolving the names of ``table`` on first use."""

    def __getattr__(name: str) -> Any:
        target = table.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(target[0]), target[1])
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
