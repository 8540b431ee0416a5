"""The optional mypyc compile of spanassert's hot modules (build_support/spanassert_build.py says
which build a `pip install` makes; everything else about the package is in pyproject.toml)."""
from __future__ import annotations

import os
import sys
from typing import Any, Dict, List

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "build_support"))

import spanassert_build as sb  # noqa: E402 - found through the line above

# Commands that build the wheel's contents; metadata, sdist and editable commands never compile.
BUILD_COMMANDS = {"build", "build_ext", "bdist_wheel"}


def _warn(message: str) -> None:
    print(f"spanassert: {message}", file=sys.stderr)


class GuardedBuildExt(build_ext):  # type: ignore[misc]  # setuptools' command classes are untyped
    """build_ext that never writes into src/ and, when the compile was not required, falls back to the
    pure package if the C compile fails (the wheel keeps every .py; no half-built extension is left)."""

    required = False

    def finalize_options(self) -> None:
        super().finalize_options()
        if self.inplace and self.extensions:
            raise SystemExit("spanassert: refusing to build compiled modules in place: they would shadow the "
                             "sources in src/. Build a wheel, or run `make compiled-venv`.")

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:
            if self.required:
                raise
            _warn(f"the compile failed ({type(e).__name__}: {e}); building pure Python instead")
            for ext in self.extensions:
                path = os.path.join(self.build_lib, self.get_ext_filename(ext.name))
                if os.path.exists(path):
                    os.remove(path)


def _options() -> Dict[str, Any]:
    if not BUILD_COMMANDS.intersection(sys.argv[1:]):
        return {}
    chosen, why = sb.mode()
    if chosen == sb.PURE:
        _warn(f"building pure Python ({why})")
        return {}
    GuardedBuildExt.required = chosen == sb.REQUIRED
    try:
        from mypyc.build import mypycify

        # mypy names each module from its path (spanassert.core.calls: src/ has no __init__.py).
        ext_modules: List[Any] = mypycify([os.path.join("src", m) for m in sb.MODULES], opt_level="3",
                                          group_name=sb.GROUP, target_dir=os.path.join("build", "mypyc"))
    except BaseException as e:
        if chosen == sb.REQUIRED:
            raise
        _warn(f"cannot compile ({type(e).__name__}: {e}); building pure Python instead")
        return {}
    _warn(f"compiling {len(sb.MODULES)} modules with mypyc ({why})")
    return {"ext_modules": ext_modules, "cmdclass": {"build_ext": GuardedBuildExt}}


setup(**_options())
