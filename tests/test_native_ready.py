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

from spanassert.assertions import ASSERTION_TYPES, EXPECTED_TYPES, Assertion

_PER_INSTANCE = [n for n in Assertion.CAPABILITIES
                 if not str(Assertion.__annotations__[n]).startswith("ClassVar")]


def _types() -> List[Type[Assertion]]:
    return list(ASSERTION_TYPES.values()) + list(EXPECTED_TYPES.values())


def test_the_per_instance_capabilities_are_known() -> None:
    assert "order_free" in _PER_INSTANCE and "needs" in _PER_INSTANCE
    assert "decides_on_close" not in _PER_INSTANCE  # a ClassVar: read off the class, compiled or not


@pytest.mark.parametrize("cls", _types(), ids=lambda c: c.__name__)
def test_no_type_sets_a_per_instance_capability_in_its_class_body(cls: Type[Assertion]) -> None:
    for klass in cls.__mro__:
        if klass is Assertion:
            break
        wrong = sorted(set(_PER_INSTANCE) & set(vars(klass)))
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
