"""spanassert's build backend: setuptools, plus an optional mypyc compile of the hot modules.

Which build ``pip install`` makes (docs/performance.md, "Compiled build"):

- ``SPANASSERT_PURE=1``: pure Python. Needs nothing but setuptools (no compiler, no mypy).
- ``SPANASSERT_COMPILE=1``: compiled with mypyc; anything that stops the compile is an error (CI,
  ``make compiled-venv``, release wheels).
- neither (a wheel built from the sdist): compiled when this interpreter can build C extensions
  (CPython 3.10 or newer, not free-threaded, a C compiler that finds Python's headers), pure
  otherwise, and pure (with a warning) if the compile fails. Only then is the pinned mypy added to
  the build requirements, so a machine without a compiler installs the sdist pure without
  downloading mypy (an offline install with a compiler: set ``SPANASSERT_PURE=1``).
- an editable install (``pip install -e``, ``make venv``) and the sdist are always pure: compiled
  modules in src/ would shadow the sources being edited.

The compiled wheel keeps every ``.py`` beside the compiled modules (an extension module is found
before its source), so a module left out of ``MODULES`` or a failed compile leaves the pure package.
build_support/compiled_modules.py is the one place that lists the compiled modules and pins mypy;
setup.py, this backend, the compiled venv (build_support/compiled_venv.py) and tests/test_build.py read it.
"""
from __future__ import annotations

import os
import platform
import re
import sys
import sysconfig
import tempfile
from typing import Any, Dict, List, Optional, Tuple

from compiled_modules import GROUP, MIN_PYTHON, MODULES, MYPY, TYPE_STUBS  # noqa: F401 - the one list
from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 - every other hook is setuptools' own

PURE, AUTO, REQUIRED = "pure", "auto", "required"


def requested() -> str:
    """What the environment asks for: PURE, REQUIRED (compile or fail) or AUTO."""
    if os.environ.get("SPANASSERT_PURE", "") not in ("", "0"):
        return PURE
    if os.environ.get("SPANASSERT_COMPILE", "") not in ("", "0"):
        return REQUIRED
    return AUTO


def compiler_problem() -> Optional[str]:
    """Why this interpreter cannot build the compiled modules, or None if it can."""
    if platform.python_implementation() != "CPython":
        return f"mypyc compiles for CPython only (this is {platform.python_implementation()})"
    if sys.version_info < MIN_PYTHON:
        return f"{MYPY} needs Python {'.'.join(map(str, MIN_PYTHON))} or newer"
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        return "a free-threaded Python: mypyc's output is not built for it here"
    try:  # a C file that includes Python.h, compiled the way setuptools compiles extensions
        from setuptools._distutils.ccompiler import new_compiler
        from setuptools._distutils.sysconfig import customize_compiler

        cc: Any = new_compiler()
        customize_compiler(cc)
        with tempfile.TemporaryDirectory() as tmp:
            probe = os.path.join(tmp, "probe.c")
            with open(probe, "w", encoding="ascii") as f:
                f.write("#include <Python.h>\nint spanassert_probe(void) { return 0; }\n")
            cc.compile([probe], output_dir=tmp, include_dirs=[sysconfig.get_paths()["include"]])
    except Exception as e:  # noqa: BLE001 - any failure (no compiler, no headers) means: build pure
        return f"no working C compiler with Python's headers ({type(e).__name__}: {e})"
    return None


def mode() -> Tuple[str, str]:
    """(PURE or REQUIRED/AUTO meaning "compile", why) for the build about to run."""
    asked = requested()
    if asked == PURE:
        return PURE, "SPANASSERT_PURE is set"
    problem = compiler_problem()
    if problem is None:
        return asked, "a C compiler is available" if asked == AUTO else "SPANASSERT_COMPILE is set"
    if asked == REQUIRED:
        raise RuntimeError(f"SPANASSERT_COMPILE is set but the modules cannot be compiled: {problem}")
    return PURE, problem


def _project_dependencies() -> List[str]:
    """pyproject.toml's run-time dependencies (mypy reads their types while it compiles): the strings
    of its `dependencies = [...]` list (tomllib is 3.11+; tests/test_build.py holds this to tomllib's)."""
    with open("pyproject.toml", encoding="utf-8") as f:
        text = f.read()
    block = re.search(r"^dependencies = \[(.*?)^\]", text, re.S | re.M)
    if block is None:
        raise RuntimeError("pyproject.toml: no `dependencies = [...]` list")
    return re.findall(r'^\s*"([^"]+)"', block.group(1), re.M)


def compile_requirements() -> List[str]:
    return [MYPY, *TYPE_STUBS, *_project_dependencies()]


# PEP 517 hooks that differ from setuptools': the compile's requirements only when it compiles, and
# pure editable installs and sdists whatever the environment says.

def requires_to_compile() -> List[str]:
    """What a wheel build needs beyond setuptools: the compile's requirements, or nothing for a pure build."""
    chosen, why = mode()
    if chosen == PURE:
        print(f"spanassert: building pure Python ({why})", file=sys.stderr)
        return []
    return compile_requirements()


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    base: List[str] = _setuptools.get_requires_for_build_wheel(config_settings)
    return base + requires_to_compile()


def _pure(hook: Any) -> Any:
    def run(*args: Any, **kwargs: Any) -> Any:
        os.environ["SPANASSERT_PURE"] = "1"  # this hook's own process (each hook runs in its own)
        return hook(*args, **kwargs)

    run.__name__ = hook.__name__
    run.__doc__ = hook.__doc__
    run.always_pure = True  # type: ignore[attr-defined]  # read by tests/test_build.py
    return run


build_sdist = _pure(_setuptools.build_sdist)
get_requires_for_build_sdist = _pure(_setuptools.get_requires_for_build_sdist)
if hasattr(_setuptools, "build_editable"):
    build_editable = _pure(_setuptools.build_editable)
    get_requires_for_build_editable = _pure(_setuptools.get_requires_for_build_editable)
    prepare_metadata_for_build_editable = _pure(_setuptools.prepare_metadata_for_build_editable)
