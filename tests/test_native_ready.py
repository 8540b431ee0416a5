"""The declarations a compiled build (mypyc, issue 15) relies on, held in the pure build too.

- A per-instance capability (Assertion.CAPABILITIES not declared ClassVar) is set in a type's
  ``__init__``, never in a class body: a compiled engine reads it from the instance's own field, and
  a class-body value in a class that is not compiled (a plugin, a module left pure) is not that
  field (mypyc: the base's default would be read).
- The compiled build's markers (``core.native``) do nothing at run time, with or without
  ``mypy_extensions`` installed (the guard tests' framework venvs do not have it)."""
from __future__ import annotations

import subprocess
import sys
from typing import List, Type

import pytest

from spanassert.assertions import ASSERTION_TYPES, EXPECTED_TYPES, Assertion, register
from spanassert.assertions.registry import PER_INSTANCE_CAPABILITIES

_PER_INSTANCE = list(PER_INSTANCE_CAPABILITIES)


def _types() -> List[Type[Assertion]]:
    return list(ASSERTION_TYPES.values()) + list(EXPECTED_TYPES.values())


def test_the_per_instance_capabilities_are_known() -> None:
    assert "order_free" in _PER_INSTANCE and "needs" in _PER_INSTANCE
    assert "decides_on_close" not in _PER_INSTANCE  # a ClassVar: read off the class, compiled or not
    if "decides_on_close" in getattr(Assertion, "__annotations__", {}):  # the pure build (a native class has none)
        assert [n for n in Assertion.CAPABILITIES
                                 if not str(Assertion.__annotations__[n]).startswith("ClassVar")] == _PER_INSTANCE


@pytest.mark.parametrize("cls", _types(), ids=lambda c: c.__name__)
def test_no_type_sets_a_per_instance_capability_in_its_class_body(cls: Type[Assertion]) -> None:
    for klass in cls.__mro__:
        if klass is Assertion:
            break
        # (a compiled class's own fields are data descriptors in its dict: not a class-body value)
        wrong = sorted(n for n in set(_PER_INSTANCE) & set(vars(klass)) if not hasattr(type(vars(klass)[n]), "__set__"))
        assert not wrong, (f"{klass.__qualname__} sets {wrong} in its class body: set them in __init__ "
                           "(self.name = value), where a compiled engine reads them")


def test_a_type_s_capabilities_set_in_init_are_read_from_the_instance() -> None:
    from spanassert import load_config

    config = load_config("version: 1\ntests:\n  - id: t\n    assertions:\n"
                         "      - type: trace_must_not_call_tool\n        tool: x\n"
                         "      - type: trace_must_call_tool\n        tool: y\n")
    must_not, must = (a for t in config.tests for a in t.assertions)
    assert (must_not.order_free, must_not.untouched_close_shared) == (True, True)
    assert (must.order_free, must.pass_survives_unseen_calls) == (False, True)


def test_a_plugin_that_sets_capabilities_in_its_class_body_is_read_the_same_by_every_engine() -> None:
    # A plugin written to the old advice (class-body values): register() moves them to its instances,
    # so that a compiled engine reads what Python code reads (in the pure build there is nothing to move).
    from typing import Any

    from spanassert import load_config
    from spanassert.assertions.base import NEED_ARGUMENTS
    from spanassert.core.engine import Engine
    from spanassert.core.model import Outcome

    class PluginNoX(Assertion):
        type_name = "test_plugin_class_body"
        doc = "a plugin"
        order_free = True
        needs = frozenset((NEED_ARGUMENTS,))

        def on_close(self, state: Any, episode: Any) -> Outcome:
            return Outcome.passed("ok")

    class PluginSub(PluginNoX):
        type_name = "test_plugin_class_body_sub"
        order_free = False

        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            self.untouched_close_shared = True

    try:
        register(PluginNoX)
        register(PluginSub)
        config = load_config("version: 1\ntests:\n  - id: t\n    assertions:\n"
                             "      - type: test_plugin_class_body\n      - type: test_plugin_class_body_sub\n")
        nox, sub = config.tests[0].assertions
        assert (nox.order_free, sorted(nox.needs), nox.untouched_close_shared) == (True, ["arguments"], False)
        assert (sub.order_free, sorted(sub.needs), sub.untouched_close_shared) == (False, ["arguments"], True)
        assert Engine(config).has_precheck  # the engine's own reading (compiled code, where compiled)
    finally:
        for name in ("test_plugin_class_body", "test_plugin_class_body_sub"):
            dict.pop(ASSERTION_TYPES, name, None)


_NO_MYPY_EXTENSIONS = """
import sys
sys.modules["mypy_extensions"] = None  # an import of it raises ImportError, as where it is not installed
from spanassert.core import native
class C: pass
assert native.trait(C) is C and native.mypyc_attr(allow_interpreted_subclasses=True)(C) is C
from spanassert.core.engine import Engine
from spanassert.core.episode import Episode, Sink
from spanassert.assertions import Assertion
class S(Sink): pass
class A(Assertion): pass
print("ok", Episode.__mro__[1].__name__)
"""


def test_the_compiled_build_markers_are_no_ops_without_mypy_extensions() -> None:
    out = subprocess.run([sys.executable, "-c", _NO_MYPY_EXTENSIONS], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ok", "EpisodeView"]


def test_the_compiled_build_markers_are_no_ops_here() -> None:
    from spanassert.core import native  # mypy_extensions' own markers where it is installed

    class C:
        pass

    assert native.trait(C) is C and native.mypyc_attr(allow_interpreted_subclasses=True)(C) is C
