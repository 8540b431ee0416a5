"""Assay compatibility (issue 19), through the CLI as a user runs it: `tests:` with no value, one
coverage row per check, and a test whose `input.prompt` names no episode in the input."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spanassert.cli", *args], cwd=str(cwd), capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("value", ["", " ~", " null"])
def test_tests_with_no_value_is_refused_like_an_empty_list(tmp_path: Path, value: str) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(f"version: 1\ntests:{value}\n")
    p = run("validate", str(rules), cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    out = p.stdout + p.stderr
    assert "rules.yaml:2:" in out and "E_CFG_VALUE" in out and "`tests` has no value" in out
    assert "invalid: 1 file, 1 error" in out
    # the same file is refused by replay too (exit 2, nothing judged)
    trace = tmp_path / "t.jsonl"
    trace.write_text("")
    r = run("replay", "-c", str(rules), str(trace), cwd=tmp_path)
    assert r.returncode == 2 and "`tests` has no value" in r.stdout + r.stderr
