"""The build: the optional mypyc compile (build_support/) never leaves a compiled module in src/ to shadow
an edited source, asks for mypy only when it compiles, and a compiled build under test is of this source.

`make test-compiled` runs the whole suite against the compiled venv (build_support/compiled_venv.py) with
SPANASSERT_EXPECT_COMPILED=1; there the last two tests check that every listed module really is compiled
and that the installed sources are this checkout's (else the suite would have tested a stale build)."""
from __future__ import annotations

import importlib
import importlib.machinery
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
sys.path.insert(0, str(ROOT / "build_support"))

import compiled_modules  # noqa: E402

EXTENSIONS = tuple(importlib.machinery.EXTENSION_SUFFIXES)
EXPECT_COMPILED = os.environ.get("SPANASSERT_EXPECT_COMPILED") == "1"


def _module_name(path: str) -> str:
    return path[: -len(".py")].replace("/", ".").replace(".__init__", "")


def test_no_compiled_module_lies_in_src() -> None:
    found = [str(p.relative_to(ROOT)) for p in SRC.rglob("*")
             if p.is_file() and (p.name.endswith(EXTENSIONS) or p.suffix in (".so", ".pyd") or "__mypyc" in p.name)]
    assert not found, f"compiled modules in src/ shadow their sources there: {found}; delete them"


def test_every_listed_module_exists_and_the_record_fallback_is_not_compiled() -> None:
    for path in compiled_modules.MODULES:
        assert (SRC / path).is_file(), path
        # A compiled package __init__ cannot import its submodules (ModuleNotFoundError).
        assert not path.endswith("__init__.py"), path
    # Its `if TYPE_CHECKING: ... else:` fallback is unreachable to mypyc, which then raises at import.
    assert "spanassert/core/records.py" not in compiled_modules.MODULES
    assert "spanassert/core/native.py" not in compiled_modules.MODULES
    # msgspec builds its decoders from these generic Struct classes: compiled, they cannot be subscripted.
    assert "spanassert/otlp/json_structs.py" not in compiled_modules.MODULES


def test_the_compile_pins_the_mypy_and_stubs_the_lint_uses() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert f'"{compiled_modules.MYPY}; python_version >= \'3.10\'"' in pyproject
    for stub in compiled_modules.TYPE_STUBS:
        assert f'"{stub}"' in pyproject


def _requires(env: Dict[str, str], call: str = "b.requires_to_compile()") -> List[str]:
    """What the build backend asks pip to install for a wheel beyond setuptools (setuptools' own part
    needs setuptools 77, which pip's isolated build has), in a fresh process as pip runs it."""
    code = f"import json, spanassert_build as b; print(json.dumps({call}))"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SPANASSERT_") and k != "CC"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=dict(clean, PYTHONPATH=str(ROOT / "build_support"), **env))
    assert done.returncode == 0, done.stderr
    out: List[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def _asks_for_mypy(requires: List[str]) -> bool:
    return any(r.startswith("mypy") for r in requires)


def test_a_pure_build_asks_for_no_mypy_and_a_compiled_one_for_the_pin() -> None:
    assert not _asks_for_mypy(_requires({"SPANASSERT_PURE": "1"}))
    # An sdist and an editable install are pure whatever the environment asks: their hooks run pure.
    for hook in ("build_sdist", "build_editable", "get_requires_for_build_editable"):
        probe = f"[getattr(b, '{hook}').always_pure, b._pure(lambda: b.requires_to_compile())()]"
        wrapped, extra = _requires({"SPANASSERT_COMPILE": "1"}, probe)
        assert wrapped is True and extra == []
    if sys.version_info >= compiled_modules.MIN_PYTHON:
        compiled = _requires({"SPANASSERT_COMPILE": "1"})
        assert compiled_modules.MYPY in compiled and "msgspec>=0.18" in compiled, compiled


def test_without_a_c_compiler_the_default_build_is_pure_and_asks_for_no_mypy() -> None:
    # A machine without a compiler (CC names none): the sdist still installs, pure, with setuptools alone.
    assert not _asks_for_mypy(_requires({"CC": "/nonexistent/cc"}))


def test_a_required_compile_without_a_compiler_fails_with_the_reason() -> None:
    code = "import spanassert_build as b; b.requires_to_compile()"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SPANASSERT_")}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=dict(clean, PYTHONPATH=str(ROOT / "build_support"), SPANASSERT_COMPILE="1",
                                   CC="/nonexistent/cc"))
    assert done.returncode != 0
    reason = "no working C compiler" if sys.version_info >= compiled_modules.MIN_PYTHON else "needs Python"
    assert "SPANASSERT_COMPILE is set but the modules cannot be compiled" in done.stderr and reason in done.stderr


def test_the_spanassert_under_test_is_compiled_exactly_when_asked() -> None:
    import spanassert

    names = [_module_name(m) for m in compiled_modules.MODULES]
    compiled = [n for n in names if (importlib.import_module(n).__file__ or "").endswith(EXTENSIONS)]
    if EXPECT_COMPILED:  # make test-compiled
        assert compiled == names, f"not compiled: {sorted(set(names) - set(compiled))}"
        assert not Path(spanassert.__file__).is_relative_to(SRC)
    else:
        assert compiled == [], f"a compiled build under a pure test run: {compiled} ({spanassert.__file__})"


def test_the_spanassert_under_test_is_of_this_source() -> None:
    import spanassert

    installed = Path(spanassert.__file__).parent
    if not EXPECT_COMPILED:  # the editable install (make venv) or src/ on PYTHONPATH
        assert installed == SRC / "spanassert", spanassert.__file__
        return
    # The compiled wheel keeps each module's source beside it: equal sources, so the compiled modules were
    # built from this checkout (a stale compiled venv would have tested older code).
    stale = [str(p.relative_to(SRC)) for p in (SRC / "spanassert").rglob("*")
             if p.is_file() and "__pycache__" not in p.parts
             and (installed / p.relative_to(SRC / "spanassert")).read_bytes() != p.read_bytes()]
    assert not stale, f"the compiled venv is older than src/ for {stale}: rebuild it (make compiled-venv)"


def test_the_backend_reads_the_run_time_dependencies_as_toml_does() -> None:
    import spanassert_build

    here = os.getcwd()
    os.chdir(ROOT)
    try:
        read = spanassert_build._project_dependencies()
    finally:
        os.chdir(here)
    assert "msgspec>=0.18" in read
    if sys.version_info >= (3, 11):
        import tomllib

        assert read == tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]


# Pure classes that descend from a compiled one but are only instantiated in a pure process.
PURE_ONLY = {"test_close_untouched._SpyView": "built only in the pure rerun (tests/native.py ran_pure)"}


def test_no_pure_class_descends_from_a_class_the_build_compiles() -> None:
    # A compiled (native) class cannot be the ancestor of a class that stays Python (the subclass cannot
    # be instantiated, "interpreted classes cannot inherit from compiled"), unless it is declared with
    # mypyc_attr(allow_interpreted_subclasses=True) (a decorator: decorated classes are not counted here).
    # Checked over src/ and tests/ (bases resolved through each module's imports), so that widening the
    # list fails here before a compile.
    import ast

    compiled = {_module_name(m) for m in compiled_modules.MODULES}
    bases: Dict[Tuple[str, str], List[Tuple[str, str]]] = {}
    native = set()
    for root in (SRC, ROOT / "tests"):
        for path in root.rglob("*.py"):
            module = _module_name(str(path.relative_to(root)).replace(os.sep, "/"))
            package = module if path.name == "__init__.py" else module.rpartition(".")[0]
            tree = ast.parse(path.read_text(encoding="utf-8"))
            imported: Dict[str, Tuple[str, str]] = {}
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom):
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1]) if node.level else ""
                    source = ".".join(p for p in (base, node.module or "") if p)
                    for alias in node.names:
                        imported[alias.asname or alias.name] = (source, alias.name)
            local = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
            for node in ast.walk(tree):
                if not isinstance(node, ast.ClassDef):
                    continue
                bases[(module, node.name)] = [(module, b.id) if b.id in local else imported.get(b.id, ("?", b.id))
                                              for b in node.bases if isinstance(b, ast.Name)]
                if module in compiled and not node.decorator_list:
                    native.add((module, node.name))

    def ancestors(cls: Tuple[str, str], seen: Set[Tuple[str, str]]) -> Set[Tuple[str, str]]:
        for parent in bases.get(cls, []):
            if parent not in seen:
                seen.add(parent)
                ancestors(parent, seen)
        return seen

    bad = [f"{m}.{c} <- {a[0]}.{a[1]}" for (m, c) in bases if m not in compiled and f"{m}.{c}" not in PURE_ONLY
           for a in ancestors((m, c), set()) if a in native]
    assert not bad, f"pure classes descend from compiled ones (leave the module out, or allow subclasses): {bad}"


def test_pruning_old_compiled_venvs_keeps_one_in_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A build in one worktree pruned the compiled venv a 25-minute `make test-compiled` in another was
    # running (68 tests failed: its python was gone). A venv whose <venv>.inuse lock is held is kept.
    import fcntl
    import time

    import compiled_venv

    monkeypatch.setattr(compiled_venv, "CACHE", tmp_path)
    venvs = []
    for i in range(compiled_venv.KEEP + 2):
        v = tmp_path / f"compiled-py3-{i}"
        v.mkdir()
        (v / ".complete").touch()
        os.utime(v / ".complete", (time.time() - 1000 + i, time.time() - 1000 + i))
        venvs.append(v)
    oldest, second = venvs[0], venvs[1]
    with open(oldest.with_name(oldest.name + ".inuse"), "w") as held:
        fcntl.flock(held, fcntl.LOCK_SH)  # as `flock -s` holds it for a test run
        compiled_venv._prune()
    assert oldest.exists()
    assert not second.exists() and not second.with_name(second.name + ".inuse").exists()
    assert all(v.exists() for v in venvs[2:])
