"""Issue 12, situation 6: an input with nothing to judge never goes green.

`spanassert replay` as a subprocess over real files: an empty file, an empty folder, a file of NUL
bytes and spans without any episode exit 2 with a message that says why (``--allow-empty`` lets the
verdicts decide); a FIFO inside a folder is skipped with a warning and never opened.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from replay_episodes import write_episodes

RULES = """\
version: 1
tests:
  - id: no-db-delete
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
"""


def replay(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("SPANASSERT_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "spanassert.cli", "replay", *args], capture_output=True,
                          text=True, encoding="utf-8", timeout=timeout, env=env)


@pytest.fixture()
def rules(tmp_path: Path) -> Path:
    p = tmp_path / "rules.yaml"
    p.write_text(RULES, encoding="utf-8")
    return p


def _empty_inputs(tmp_path: Path) -> "dict[str, Path]":
    empty_file = tmp_path / "empty.jsonl"
    empty_file.write_bytes(b"")
    empty_dir = tmp_path / "exports"
    empty_dir.mkdir()
    nul_file = tmp_path / "zeroed.binpb"
    nul_file.write_bytes(b"\0" * 4096)
    return {"empty file": empty_file, "empty folder": empty_dir, "NUL bytes": nul_file}


def test_no_spans_read_exits_2_with_a_clear_message(rules: Path, tmp_path: Path) -> None:
    for what, path in _empty_inputs(tmp_path).items():
        proc = replay("--config", str(rules), str(path))
        assert proc.returncode == 2, (what, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr
        assert "no spans were read from the input" in proc.stderr, (what, proc.stderr)
        assert "--allow-empty" in proc.stderr
    proc = replay("--config", str(rules), str(tmp_path / "zeroed.binpb"))
    assert "holds only NUL bytes (4096 bytes)" in proc.stderr + proc.stdout


def test_allow_empty_lets_the_verdicts_decide(rules: Path, tmp_path: Path) -> None:
    inputs = _empty_inputs(tmp_path)
    for what in ("empty file", "empty folder"):
        proc = replay("--config", str(rules), "--allow-empty", str(inputs[what]))
        assert proc.returncode == 0, (what, proc.stdout, proc.stderr)
    doc = json.loads(replay("--config", str(rules), "--format", "json", str(inputs["empty file"])).stdout)
    assert doc["exit_code"] == 2 and doc["summary"]["empty"].startswith("no spans were read")
    assert doc["options"]["allow_empty"] is False
    # A NUL-filled file is unreadable input, not an empty one: --allow-empty does not hide it.
    proc = replay("--config", str(rules), "--allow-empty", str(inputs["NUL bytes"]))
    assert proc.returncode == 2 and "holds only NUL bytes" in proc.stderr


def test_spans_without_any_episode_exit_2(rules: Path, tmp_path: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from otlp_file_exporter import FileSpanExporter

    path = tmp_path / "http.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    tracer = provider.get_tracer("web")
    with tracer.start_as_current_span("GET /health", attributes={"http.request.method": "GET"}):
        pass
    provider.shutdown()
    proc = replay("--config", str(rules), str(path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "1 span(s) were read but no episode was found" in proc.stderr
    assert replay("--config", str(rules), "--allow-empty", str(path)).returncode == 0


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo (POSIX)")
def test_fifo_inside_a_folder_is_skipped_with_a_warning_not_waited_on(rules: Path, tmp_path: Path) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    write_episodes(folder / "a.jsonl", [[("delete_database", {"name": "prod"})]])
    os.mkfifo(folder / "b.pipe")  # no writer ever opens it: opening it for reading would block forever
    for target in (folder, folder / "*"):  # a folder, and a glob that matches the FIFO
        proc = replay("--config", str(rules), str(target), timeout=60)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "b.pipe: warning: skipped: a FIFO (named pipe), not a regular file" in proc.stdout
        assert "0 passed, 1 failed, 0 inconclusive" in proc.stdout
