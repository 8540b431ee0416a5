"""Faults injected where the live door calls the engine, in a pure and a compiled build alike.

The live processor (and the guard, through it) holds its engine as ``processor.engine`` and calls
its methods from Python: ``FaultyEngine`` stands in that place, passes every call and attribute
read to the real engine, and makes the calls a test chooses raise before the engine sees them (the
span's start or end could not be judged). A compiled engine's methods cannot be replaced (native
attributes are read-only, calls inside the compiled group are direct), so this is the seam, not a
patched method.
"""
from __future__ import annotations

from typing import Any, Callable, List, Tuple

Chooser = Callable[[str, Tuple[Any, ...], dict], bool]  # (method, args, kwargs) -> raise here?


class FaultyEngine:
    """``engine`` with ``method`` calls that ``chooser`` picks raising ``RuntimeError(message)``."""

    def __init__(self, engine: Any, methods: Tuple[str, ...], chooser: Chooser, message: str = "injected") -> None:
        object.__setattr__(self, "_engine", engine)
        object.__setattr__(self, "_methods", methods)
        object.__setattr__(self, "_chooser", chooser)
        object.__setattr__(self, "_message", message)
        object.__setattr__(self, "raised", [])

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._engine, name)
        if name not in self._methods:
            return real

        def call(*args: Any, **kwargs: Any) -> Any:
            if self._chooser(name, args, kwargs):
                self.raised.append((name, args))
                raise RuntimeError(self._message)
            return real(*args, **kwargs)

        return call

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._engine, name, value)


def install(processor: Any, methods: Tuple[str, ...], chooser: Chooser, message: str = "injected") -> FaultyEngine:
    """Put a FaultyEngine in ``processor``'s engine place; returns it (``.raised`` lists the faults)."""
    faulty = FaultyEngine(processor.engine, methods, chooser, message)
    processor.engine = faulty
    return faulty


def span_named(*names: str, nth: int = 0) -> Chooser:
    """Raise at the ``nth`` (0: every) call whose span name (the 4th argument, or ``name=``) is one of
    ``names``."""
    seen: List[int] = [0]

    def choose(method: str, args: Tuple[Any, ...], kwargs: dict) -> bool:  # noqa: ARG001 - a Chooser
        name = kwargs.get("name", args[3] if len(args) > 3 else None)
        if name not in names:
            return False
        seen[0] += 1
        return nth == 0 or seen[0] == nth

    return choose


# -- rules a test adds (interpreted subclasses of Assertion: the engine calls their methods through
# Python in either build) ------------------------------------------------------------------------
def _rule_types() -> Tuple[Any, ...]:
    from spanassert.assertions import Assertion
    from spanassert.core.model import Outcome

    class RaisesAtClose(Assertion):
        type_name = "test_raises_at_close"
        doc = "Test only: deciding it when the episode closes raises RuntimeError."
        decides_on_close = True

        def on_close(self, state: Any, episode: Any) -> Outcome:
            raise RuntimeError("injected: a rule's decision at close raised")

    class RecordsCalls(Assertion):
        type_name = "test_records_calls"
        doc = "Test only: records each call (name, agent, index) when it starts into CALLS; passes."

        def on_call_start(self, state: Any, call: Any) -> None:
            CALLS.append((call.name, call.agent, call.index))

        def on_close(self, state: Any, episode: Any) -> Outcome:
            return Outcome.passed("recorded")

    from serve_harness import fault_type

    return RaisesAtClose, RecordsCalls, fault_type()


CALLS: List[Tuple[str, Any, int]] = []


def add_rule_types(monkeypatch: Any) -> None:
    """Register the test-only types above for one test (``monkeypatch`` undoes it); clears CALLS."""
    from spanassert.assertions import ASSERTION_TYPES

    for cls in _rule_types():
        monkeypatch.setitem(ASSERTION_TYPES, cls.type_name, cls)
    CALLS.clear()
