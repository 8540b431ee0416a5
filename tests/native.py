"""The suite against a compiled build (mypyc: the engine's modules as native classes), and the two
things a test needs to know there.

- ``COMPILED``: whether the engine's modules were imported from extension modules. A native class
  has no ``__annotations__``/``__slots__`` to read, its methods cannot be replaced (on the class or
  an instance), and calls inside the compiled group are direct: a test's seam is then an object the
  product is given (a sink, a rule, the processor's engine), never a patched attribute.
- ``ran_pure(request)``: a test that watches which attributes Python code reads (a spy's
  ``__getattribute__``, the caller's frame) checks a property of the SOURCE, which compiled code
  cannot show (it reads a native attribute without asking Python). In a compiled build it runs
  again in a subprocess on the pure modules (``SPANASSERT_PURE=1``, ``src/`` first on the path)
  and must pass there; that subprocess fails if it still got compiled modules.
"""
from __future__ import annotations

import importlib
import importlib.machinery
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_MODULES = ("spanassert.core.engine", "spanassert.core.model", "spanassert.assertions.base",
            "spanassert.mapping.mapper")
_RERUN = "SPANASSERT_TEST_PURE_RERUN"


def _compiled() -> bool:
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    return any(str(getattr(importlib.import_module(m), "__file__", "")).endswith(suffixes) for m in _MODULES)


COMPILED = _compiled()
if COMPILED and os.environ.get(_RERUN):
    raise RuntimeError(f"asked for the pure modules ({_RERUN}, SPANASSERT_PURE=1) but imported compiled ones: "
                       f"{[importlib.import_module(m).__file__ for m in _MODULES]}")


def ran_pure(request: Any) -> bool:
    """False in a pure build (run the test here). In a compiled build: the test ran again on the pure
    modules in a subprocess and passed there (an AssertionError with its output otherwise)."""
    if not COMPILED:
        return False
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")] +
                           [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    env = dict(os.environ, SPANASSERT_PURE="1", PYTHONPATH=path, **{_RERUN: "1"})
    env.pop("SPANASSERT_EXPECT_COMPILED", None)  # `make test-compiled`'s check is for this process, not the rerun
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", request.node.nodeid],
                          cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=900)
    out = done.stdout + done.stderr
    assert done.returncode == 0 and re.search(r"(^|\s)1 passed", out), f"on the pure modules:\n{out[-6000:]}"
    return True
