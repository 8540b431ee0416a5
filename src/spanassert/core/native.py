"""What a compiled build (mypyc, issue 15) reads from the declarations of the classes it compiles:
``trait`` (a class that is a second base: :class:`~spanassert.core.episode.StateHolder`) and
``mypyc_attr(allow_interpreted_subclasses=True)`` (a class that plugins, the other parts of
spanassert or tests subclass). Both do nothing at run time; without ``mypy_extensions`` (the pure
build needs nothing but Python) they are the no-ops below. This module is never compiled itself:
mypyc would take its ``TYPE_CHECKING`` branch as the only one."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, TypeVar

if TYPE_CHECKING:
    from mypy_extensions import mypyc_attr as mypyc_attr
    from mypy_extensions import trait as trait
else:
    try:
        from mypy_extensions import mypyc_attr, trait
    except ImportError:  # the pure build: mypy_extensions is not a dependency
        C = TypeVar("C")

        def trait(cls: C) -> C:
            return cls

        def mypyc_attr(*_attrs: str, **_kwattrs: Any) -> Callable[[C], C]:
            return lambda cls: cls

__all__ = ["mypyc_attr", "trait"]
