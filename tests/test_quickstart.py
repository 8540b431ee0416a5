"""The README's quick start, as a new user runs it: in a fresh `git clone` of this repository, the
Python block and then the shell commands, as written. It must print each violation exactly once,
exit as stated, and leave the clone clean (outputs only in the git-ignored out/)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```([A-Za-z0-9_+-]*)[^\n]*\n(.*?)^```", re.M | re.S)


def _quick_start() -> "tuple[str, list]":
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## Quick start")
    end = min(i for i in (text.find("\n## ", start + 1), text.find("\n### ", start)) if i != -1)
    section = text[start:end]
    blocks = [(m.group(1), m.group(2)) for m in FENCE.finditer(section)]
    python = [b for lang, b in blocks if lang == "python"]
    shell = [b for lang, b in blocks if lang == "shell"]
    assert len(python) == 1 and len(shell) == 1, blocks
    commands = []
    for line in shell[0].splitlines():
        m = re.match(r"^(.*?)\s*#\s*exit:\s*(\d+)\s*$", line)
        cmd, code = (m.group(1), int(m.group(2))) if m else (line.strip(), 0)
        if cmd and not cmd.startswith("#"):
            commands.append((cmd, code))
    return python[0], commands


def test_quick_start_runs_as_written_in_a_fresh_clone_and_prints_each_violation_once(tmp_path: Path) -> None:
    if not (ROOT / ".git").exists() or not shutil.which("git"):
        pytest.skip("not a git checkout")
    clone = tmp_path / "clone"
    done = subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    python_block, commands = _quick_start()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPANASSERT_"))}
    # What `source .venv/bin/activate` does: the venv's scripts first on PATH.
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    script = tmp_path / "quickstart.py"
    script.write_text(python_block, encoding="utf-8")
    ran = subprocess.run([sys.executable, str(script)], cwd=clone, env=env, capture_output=True, text=True,
                         timeout=120)
    assert ran.returncode == 0, ran.stderr
    violations = [line for line in (ran.stdout + ran.stderr).splitlines() if "violation" in line.lower()]
    assert len(violations) == 3, violations
    assert all(v.startswith("VIOLATION ") for v in violations), violations  # no second line from the logger
    assert len(set(violations)) == 3
    for cmd, code in commands:
        proc = subprocess.run(cmd, shell=True, cwd=clone, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == code, f"`{cmd}` exited {proc.returncode}, expected {code}\n{proc.stdout}\n{proc.stderr}"
    assert (clone / "out" / "traces.jsonl").exists() and (clone / "out" / "report.html").exists()
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=clone,
                            capture_output=True, text=True, timeout=60)
    assert status.stdout == "", f"the quick start changed or left files in the clone:\n{status.stdout}"
