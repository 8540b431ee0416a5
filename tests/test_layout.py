"""The layout shows the design: one core, one package per front door, imports pointing from the doors
to the core and never back, and no door importing another (what two doors share lives in the core).

Every module under src/spanassert is parsed with `ast`; imports inside functions count too, since a
lazy import is still a dependency."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "spanassert"

DOORS = {"live", "replay", "serve"}
# Below the doors: the core and the libraries it is built from.
SHARED = {"core", "assertions", "config", "mapping", "otlp", "report", "term"}
# Entry points at the top: they may import anything.
TOP = {"cli", "completion", "trace", "trace_check", "pytest_plugin", "__init__", "__main__"}


def _module_name(path: Path, root: Path) -> Tuple[str, bool]:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join(parts), is_package


def _imported_modules(path: Path, root: Path) -> Iterator[Tuple[int, str]]:
    """(line, absolute module) for every import in the file, relative ones resolved."""
    module, is_package = _module_name(path, root)
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield node.lineno, target
            # `from . import x` / `from .pkg import mod` may name submodules: count them too.
            for alias in node.names:
                yield node.lineno, f"{target}.{alias.name}"


def _part(module: str) -> Optional[str]:
    """The top-level part of spanassert a module belongs to (None outside spanassert)."""
    parts = module.split(".")
    if parts[0] != "spanassert":
        return None
    if len(parts) == 1:
        return "__init__"
    return parts[1]


def _edges(root: Path = SRC) -> List[Tuple[str, str, str]]:
    """(file:line, importing part, imported part) for every import between two parts."""
    edges = []
    for path in sorted(root.rglob("*.py")):
        src_part = _part(_module_name(path, root)[0])
        assert src_part is not None
        for line, target in _imported_modules(path, root):
            dst_part = _part(target)
            if dst_part is None or dst_part == src_part:
                continue
            if dst_part not in DOORS | SHARED | TOP:
                continue  # an imported name (`from spanassert import __version__`), not a module
            edges.append((f"{path.relative_to(root)}:{line}", src_part, dst_part))
    return sorted(set(edges))


def test_every_part_of_the_package_is_classified() -> None:
    parts = {p.stem for p in SRC.glob("*.py")} | {p.name for p in SRC.iterdir() if (p / "__init__.py").exists()}
    assert parts <= DOORS | SHARED | TOP, f"unclassified: {sorted(parts - DOORS - SHARED - TOP)}; add it above"
    assert DOORS | SHARED <= parts


def test_the_core_never_imports_a_front_door_or_an_entry_point() -> None:
    bad = [f"{where}: {src} imports {dst}" for where, src, dst in _edges()
           if src in SHARED and dst in DOORS | (TOP - {"__init__"})]
    assert not bad, "\n".join(bad)


def test_front_doors_never_import_each_other() -> None:
    bad = [f"{where}: {src} imports {dst}" for where, src, dst in _edges()
           if src in DOORS and dst in DOORS | (TOP - {"__init__"})]
    assert not bad, "\n".join(bad)


def test_each_door_uses_the_core() -> None:
    used: Dict[str, Set[str]] = {}
    for _, src, dst in _edges():
        used.setdefault(src, set()).add(dst)
    for door in DOORS:
        assert "core" in used.get(door, set()), door


@pytest.mark.parametrize("source, expected", [
    ("from ..serve.server import x\n", "serve"),
    ("from spanassert.live import AssertionSpanProcessor\n", "live"),
    ("def f():\n    import spanassert.replay.driver\n", "replay"),
    ("from .. import replay\n", "replay"),
])
def test_the_check_sees_every_import_form(tmp_path: Path, source: str, expected: str) -> None:
    # A planted core module importing a door in each form must be caught (the check can fail).
    root = tmp_path / "spanassert"
    for part in DOORS | SHARED:
        (root / part).mkdir(parents=True)
        (root / part / "__init__.py").write_text("", encoding="utf-8")
    (root / "__init__.py").write_text("", encoding="utf-8")
    (root / "core" / "planted.py").write_text(source, encoding="utf-8")
    assert ("core", expected) in [(src, dst) for _, src, dst in _edges(root)]


def test_from_spanassert_import_replay_is_callable_after_the_package_was_imported(tmp_path: Path) -> None:
    # `spanassert replay` imports spanassert.replay.cli first; the README's `from spanassert import
    # replay` must still give something that replays (a fresh interpreter: import order matters).
    import subprocess
    import sys

    code = (
        "import spanassert.replay.cli\n"
        "from spanassert import replay\n"
        "report = replay('examples/rules.yaml', ['examples/recorded/support-agent.jsonl'])\n"
        "print(type(report).__name__, report.exit_code())\n"
    )
    root = SRC.parent.parent
    out = subprocess.run([sys.executable, "-c", code], cwd=str(root), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["Report", "1"]
