"""Records: plain data classes, with ``__slots__`` where the Python version supports them (3.10+).

They compare by identity, as the hand-written classes they replace did (a result or a violation is
one event, not a value), and take their fields as keywords.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, Final, Type, TypeVar

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:  # typing_extensions is not a run-time dependency: the decorator only informs type checkers

    def dataclass_transform(**_: Any) -> Callable[[Any], Any]:
        return lambda f: f


T = TypeVar("T")


@dataclass_transform(kw_only_default=True, eq_default=False)
def record(cls: Type[T]) -> Type[T]:
    if sys.version_info >= (3, 10):
        return dataclass(eq=False, slots=True, kw_only=True)(cls)
    return dataclass(eq=False)(cls)


# ``dataclass(eq=False, **SLOTS)``: what ``record`` gives (but ``kw_only``, which an explicit
# ``__init__`` makes moot), for the records a compiled build (mypyc) makes native classes. mypyc makes
# a class native only under its own decorators, ``dataclass`` among them (never under ``record``),
# and keeps the native class (its fixed layout: no ``__slots__`` to read) whatever ``slots`` says; in
# the pure build the class gets ``__slots__`` on 3.10+, as a ``record`` does.
SLOTS: Final[Dict[str, bool]] = {"slots": True} if sys.version_info >= (3, 10) else {}
