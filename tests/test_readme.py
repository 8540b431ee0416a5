"""The documentation cannot drift: every YAML block in README.md and docs/ loads (or fails with the
code it states), every Python block runs, and every `spanassert` / `python` command in a shell
block exits as stated.

Conventions inside the fenced blocks:
- YAML: a first line `# expect: E_CODE` means loading must fail with that diagnostic code;
  `# snippet: assertion` wraps the block (one assertion or a list) into a minimal rules file,
  `# snippet: test` wraps it (one test or a list) likewise. Anything else is a whole rules file.
- Python: run in a subprocess, in a temporary copy of examples/; a block that defines `test_`
  functions is run with pytest instead; a block whose first line is `# framework: NAME` is run by
  that framework's env (tests/fwenv.py, pins in .ci/frameworks/NAME.txt).
- Shell: a command starting with `spanassert` or `python` runs (cwd: a scratch directory holding
  a copy of examples/; the commands of one block share it, in order), with a `# exit: N` comment on the command line or on the line before
  it stating its exit code (0 otherwise). `make` lines and `spanassert serve` (which runs until
  stopped) are skipped, except `spanassert serve --help`.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
import yaml

from spanassert.config import load_config
from spanassert.core.model import ConfigError

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
FENCE = re.compile(r"^```([A-Za-z0-9_+-]*)[^\n]*\n(.*?)^```", re.M | re.S)
BIN = Path(sys.executable).parent


class Block:
    def __init__(self, doc: Path, line: int, lang: str, text: str) -> None:
        self.doc = doc
        self.line = line
        self.lang = lang
        self.text = text

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def blocks(*langs: str) -> List[Block]:
    out: List[Block] = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            if m.group(1) in langs:
                out.append(Block(doc, text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2)))
    return out


def ids(bs: List[Block]) -> List[str]:
    return [b.where for b in bs]


def first_line_marker(text: str, name: str) -> Optional[str]:
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    m = re.match(rf"#\s*{name}:\s*(\S+)", first)
    return m.group(1) if m else None


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A scratch directory holding a copy of examples/ (documents refer to `examples/...`)."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples",
                    ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    return tmp_path


def env_for(workdir: Path) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPANASSERT_"))}
    env["PATH"] = str(BIN) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(workdir / "examples")  # the toy embedder and the example agents
    return env


# -- YAML -------------------------------------------------------------------------------------------
YAML_BLOCKS = blocks("yaml", "yml")


def rules_text(block: Block) -> str:
    kind = first_line_marker(block.text, "snippet")
    if kind is None:
        return block.text
    body = yaml.safe_load(block.text)
    items = body if isinstance(body, list) else [body]
    if kind == "assertion":
        doc: Dict[str, Any] = {"version": 1, "tests": [{"id": "snippet", "assertions": items}]}
    elif kind == "test":
        doc = {"version": 1, "tests": items}
    else:
        raise AssertionError(f"{block.where}: unknown snippet kind {kind!r}")
    return yaml.safe_dump(doc, sort_keys=False)


def test_documents_have_yaml_python_and_shell_blocks() -> None:
    assert len(YAML_BLOCKS) >= 20
    assert blocks("python") and blocks("bash", "sh")


@pytest.mark.parametrize("block", YAML_BLOCKS, ids=ids(YAML_BLOCKS))
def test_yaml_block_loads_or_fails_with_its_stated_code(block: Block, workdir: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(workdir)
    monkeypatch.syspath_prepend(str(workdir / "examples"))
    expected_code = first_line_marker(block.text, "expect")
    path = workdir / "rules.yaml"
    path.write_text(rules_text(block), encoding="utf-8")
    if expected_code is not None:
        with pytest.raises(ConfigError) as info:
            load_config(path)
        codes = [d.code for d in info.value.diagnostics]
        assert expected_code in codes, f"{block.where}: expected {expected_code}, got {codes}"
        return
    try:
        config = load_config(path)
    except ConfigError as exc:
        problems = "\n".join(d.format() for d in exc.diagnostics)
        raise AssertionError(f"{block.where}: the block does not load:\n{problems}") from None
    failures = [(t.id, a.type_name, o.message) for t, a, o in config.unit_failures]
    assert not failures, f"{block.where}: unit-test forms failed: {failures}"


# -- Python -----------------------------------------------------------------------------------------
PY_BLOCKS = blocks("python")


@pytest.mark.parametrize("block", PY_BLOCKS, ids=ids(PY_BLOCKS))
@pytest.mark.timeout(1800)  # a `# framework:` block's first run may build its env (make test builds them first)
def test_python_block_runs(block: Block, workdir: Path) -> None:
    framework = first_line_marker(block.text, "framework")
    if framework is not None:
        # A guard adapter's example: run by the framework's own interpreter (tests/fwenv.py), the
        # package from src/ (frameworks pin versions the test venv cannot hold).
        import fwenv

        python = fwenv.python_for(framework)
        script = workdir / "readme_block.py"
        script.write_text(block.text, encoding="utf-8")
        env = {k: v for k, v in fwenv.subprocess_env().items() if not k.startswith(("OTEL_", "SPANASSERT_"))}
        proc = subprocess.run([python, str(script)], cwd=workdir, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"{block.where} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        return
    if re.search(r"^def test_", block.text, re.M):
        script = workdir / "examples" / "test_readme_block.py"
        script.write_text(block.text, encoding="utf-8")
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(script)]
    else:
        script = workdir / "readme_block.py"
        script.write_text(block.text, encoding="utf-8")
        cmd = [sys.executable, str(script)]
    proc = subprocess.run(cmd, cwd=workdir, env=env_for(workdir), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{block.where} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"


# -- shell ------------------------------------------------------------------------------------------
def commands(block: Block) -> Iterator[Tuple[str, int]]:
    """(command, expected exit code) for each runnable command of a shell block."""
    pending_exit: Optional[int] = None
    joined = block.text.replace("\\\n", " ")
    for raw in joined.splitlines():
        line = raw.strip()
        m = re.match(r"^#\s*exit:\s*(\d+)\s*$", line)
        if m:
            pending_exit = int(m.group(1))
            continue
        if not line or line.startswith("#"):
            continue
        code = 0 if pending_exit is None else pending_exit
        pending_exit = None
        m = re.search(r"\s#\s*exit:\s*(\d+)\s*$", line)
        if m:
            code = int(m.group(1))
            line = line[: m.start()].rstrip()
        if not re.match(r"^(spanassert|python)\b", line):
            continue
        if re.match(r"^spanassert\s+serve\b", line) and "--help" not in line:
            continue
        yield line, code


SHELL_BLOCKS = [b for b in blocks("bash", "sh") if list(commands(b))]


def test_shell_blocks_check_serve_help() -> None:
    assert any(cmd.startswith("spanassert serve") and "--help" in cmd
               for b in SHELL_BLOCKS for cmd, _ in commands(b))


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=ids(SHELL_BLOCKS))
def test_shell_commands_exit_as_stated(block: Block, workdir: Path) -> None:
    # The commands of one block run in order in one directory: later ones may read what earlier wrote.
    for command, code in commands(block):
        proc = subprocess.run(command, shell=True, cwd=workdir, env=env_for(workdir), capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == code, (f"{block.where}: `{command}` exited {proc.returncode}, expected {code}\n"
                                         f"{proc.stdout}\n{proc.stderr}")


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation other than '-' and '_' dropped,
    spaces to '-'."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(doc: Path) -> set:
    text = FENCE.sub("", doc.read_text(encoding="utf-8"))
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def test_every_relative_link_in_the_docs_reaches_a_file_and_a_heading() -> None:
    broken: List[str] = []
    for doc in DOCS:
        text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), doc.read_text(encoding="utf-8"))
        for m in _LINK.finditer(text):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):
                continue  # http(s), mailto: not fetched (no network)
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            where = f"{doc.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}"
            if not dest.exists():
                broken.append(f"{where}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{where}: {target} (no heading with that anchor)")
    assert not broken, "broken links:\n" + "\n".join(broken)
