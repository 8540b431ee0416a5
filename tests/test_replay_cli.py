"""`spanassert replay` as a user runs it: a subprocess over OTLP JSON Lines files written by the
real OpenTelemetry SDK (FileSpanExporter), checking stdout, stderr and exit codes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from replay_episodes import Written, write_episodes

RULES = """\
version: 1
tests:
  - id: no-db-delete
    severity: critical
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
  - id: must-search
    severity: warning
    assertions:
      - type: trace_must_call_tool
        tool: search
"""

# Episode 0 passes everything; 1 calls the forbidden tool second; 2 never searches.
EPISODES = [
    [("search", {"q": "refund policy"})],
    [("search", {"q": "db"}), ("delete_database", {"name": "prod"})],
    [("lookup", {"id": 7})],
]


def spanassert(*args: str, stdin: str = "", cwd: "Path | None" = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("SPANASSERT_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "spanassert.cli", "replay", *args], input=stdin,
                          capture_output=True, text=True, encoding="utf-8", timeout=120, cwd=cwd, env=env)


@pytest.fixture()
def rules(tmp_path: Path) -> Path:
    p = tmp_path / "rules.yaml"
    p.write_text(RULES, encoding="utf-8")
    return p


@pytest.fixture()
def exported(tmp_path: Path) -> "tuple[Path, Written]":
    path = tmp_path / "traces.jsonl"
    written = write_episodes(path, EPISODES)
    return path, written


def last_line(text: str) -> str:
    return text.rstrip("\n").splitlines()[-1]


def test_forbidden_call_fails_the_run_and_names_the_offending_span(rules: Path, exported) -> None:
    path, written = exported
    proc = spanassert("--config", str(rules), str(path))
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    bad_span = written.call_span_ids[1][1]
    lines = proc.stdout.splitlines()
    fail_line = next(line for line in lines if line.startswith("  ✗ no-db-delete"))
    assert f"`delete_database` called at call #2 (span {bad_span})" in fail_line
    # The episode header above it names the trace (short), the key and the root span.
    header = lines[lines.index(fail_line) - 1]
    assert header.startswith(f"trace {written.trace_ids[1][:8]}…")
    assert f"key {written.trace_ids[1]}" in header and 'root "invoke_agent ops"' in header
    assert any(line.startswith("  ✗ must-search") and "`search` called 0 time(s)" in line for line in lines)
    assert last_line(proc.stdout) == "4 passed, 2 failed, 0 inconclusive"


def test_clean_episodes_exit_0(rules: Path, tmp_path: Path) -> None:
    path = tmp_path / "ok.jsonl"
    write_episodes(path, [[("search", {"q": "a"})], [("search", {"q": "b"}), ("lookup", {})]])
    proc = spanassert("--config", str(rules), str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("  ✓ ") == 4
    assert last_line(proc.stdout) == "4 passed, 0 failed, 0 inconclusive"


def test_coverage_table_flags_a_rule_that_never_applied(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES + """\
  - id: billing-only
    match: {agent: billing}
    assertions:
      - type: trace_must_not_call_tool
        tool: refund
""", encoding="utf-8")
    path = tmp_path / "t.jsonl"
    write_episodes(path, [[("search", {"q": "a"})]])
    proc = spanassert("--config", str(rules), str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    row = next(line for line in proc.stdout.splitlines() if line.strip().startswith("billing-only"))
    assert row.split()[2:6] == ["0", "0", "0", "1"] and row.endswith("NEVER APPLIED")
    assert any(line.startswith("  – billing-only") and "not_applicable" in line for line in proc.stdout.splitlines())
    assert last_line(proc.stdout) == "2 passed, 0 failed, 0 inconclusive"


def test_shadow_mode_failure_is_reported_but_does_not_fail_the_run(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("""\
version: 1
tests:
  - id: no-db-delete
    mode: shadow
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
""", encoding="utf-8")
    path = tmp_path / "t.jsonl"
    write_episodes(path, [[("delete_database", {"name": "prod"})]])
    proc = spanassert("--config", str(rules), str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "  ✗ no-db-delete trace_must_not_call_tool (shadow): failed" in proc.stdout
    assert "1 failed in shadow mode (not failing the run)" in proc.stdout
    assert last_line(proc.stdout) == "0 passed, 1 failed, 0 inconclusive"


INCONCLUSIVE_RULES = """\
version: 1
tests:
  - id: no-prod-delete
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
        args_match: {name: "^prod$"}
"""


def test_inconclusive_fails_the_run_only_with_fail_on_inconclusive(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(INCONCLUSIVE_RULES, encoding="utf-8")
    path = tmp_path / "t.jsonl"
    # Arguments not recorded: whether the call matched `name: prod` cannot be decided.
    write_episodes(path, [[("delete_database", None)]])
    plain = spanassert("--config", str(rules), str(path))
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert any(line.startswith("  ? no-prod-delete") for line in plain.stdout.splitlines())
    assert last_line(plain.stdout) == "0 passed, 0 failed, 1 inconclusive"
    strict = spanassert("--config", str(rules), "--fail-on-inconclusive", str(path))
    assert strict.returncode == 1
    assert last_line(strict.stdout) == "0 passed, 0 failed, 1 inconclusive"


def _with_bad_line(path: Path, bad: str = '{"resourceSpans": [ this is not json\n') -> int:
    """Insert a malformed line after the first line; returns its 1-based line number."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines.insert(1, bad)
    path.write_text("".join(lines), encoding="utf-8")
    return 2


def test_malformed_line_is_reported_with_file_and_line_and_the_rest_is_checked(rules: Path, exported) -> None:
    path, written = exported
    lineno = _with_bad_line(path)
    proc = spanassert("--config", str(rules), str(path))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert f"{path}:{lineno}: error:" in proc.stderr
    assert f"{path}:{lineno}: error:" in proc.stdout
    # The bad line held one span of the first episode; the other episodes are still judged.
    assert f"key {written.trace_ids[1]}" in proc.stdout and f"key {written.trace_ids[2]}" in proc.stdout
    assert "2 failed" in last_line(proc.stdout)


def test_skip_invalid_lets_verdicts_decide_the_exit_code(rules: Path, exported) -> None:
    path, _ = exported
    lineno = _with_bad_line(path)
    proc = spanassert("--config", str(rules), "--skip-invalid", str(path))
    assert proc.returncode == 1  # the forbidden call, not the bad line
    assert f"{path}:{lineno}: error:" in proc.stderr


def test_skip_invalid_with_clean_verdicts_exits_0(rules: Path, tmp_path: Path) -> None:
    path = tmp_path / "ok.jsonl"
    write_episodes(path, [[("search", {"q": "a"})]])
    with path.open("a", encoding="utf-8") as f:
        f.write("not json at all\n")
    assert spanassert("--config", str(rules), str(path)).returncode == 2
    assert spanassert("--config", str(rules), "--skip-invalid", str(path)).returncode == 0


def test_strict_stops_at_the_first_bad_line_with_one_error_line(rules: Path, exported) -> None:
    path, _ = exported
    lineno = _with_bad_line(path)
    proc = spanassert("--config", str(rules), "--strict", str(path))
    assert proc.returncode == 2
    assert proc.stdout == ""
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"spanassert replay: error: {path}:{lineno}: error:")
    assert "--strict" in err[0]


def test_invalid_rules_file_exits_2_with_position_and_no_traceback(tmp_path: Path, exported) -> None:
    path, _ = exported
    rules = tmp_path / "bad.yaml"
    rules.write_text("version: 1\ntests:\n  - id: x\n    assertions:\n      - type: trace_must_not_call_tool\n"
                     "        tol: delete_database\n", encoding="utf-8")
    proc = spanassert("--config", str(rules), str(path))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert f"{rules}:6" in proc.stderr
    assert "spanassert replay: error: --config" in proc.stderr


def test_missing_rules_file_and_missing_input_exit_2(rules: Path, tmp_path: Path) -> None:
    proc = spanassert("--config", str(tmp_path / "nope.yaml"), str(tmp_path))
    assert proc.returncode == 2 and "nope.yaml: no such file" in proc.stderr and "Traceback" not in proc.stderr
    missing = tmp_path / "absent.jsonl"
    proc = spanassert("--config", str(rules), str(missing))
    assert proc.returncode == 2
    assert f"{missing}: error: no such file or directory" in proc.stderr


def test_stdin_directory_and_glob_inputs_read_the_same_spans(rules: Path, exported, tmp_path: Path) -> None:
    path, _ = exported
    folder = tmp_path / "exports" / "day1"
    folder.mkdir(parents=True)
    (folder / "part-0001.jsonl").write_bytes(path.read_bytes())
    from_file = spanassert("--config", str(rules), str(path))
    from_stdin = spanassert("--config", str(rules), "-", stdin=path.read_text(encoding="utf-8"))
    from_dir = spanassert("--config", str(rules), str(tmp_path / "exports"))
    from_glob = spanassert("--config", str(rules), str(tmp_path / "exports" / "*" / "*.jsonl"))
    for proc in (from_stdin, from_dir, from_glob):
        assert proc.returncode == 1, proc.stderr
        assert last_line(proc.stdout) == last_line(from_file.stdout) == "4 passed, 2 failed, 0 inconclusive"


def test_quiet_lists_only_problems_and_keeps_the_closing_line(rules: Path, exported) -> None:
    path, _ = exported
    proc = spanassert("--config", str(rules), "--quiet", str(path))
    assert proc.returncode == 1
    assert "✓" not in proc.stdout and "Coverage" not in proc.stdout
    assert proc.stdout.count("  ✗ ") == 2
    assert last_line(proc.stdout) == "4 passed, 2 failed, 0 inconclusive"


def test_no_progress_on_stderr_when_it_is_not_a_terminal(rules: Path, exported) -> None:
    path, _ = exported
    proc = spanassert("--config", str(rules), str(path))
    assert proc.stderr == ""


def test_unwritable_report_path_is_a_one_line_error(rules: Path, exported, tmp_path: Path) -> None:
    path, _ = exported
    blocker = tmp_path / "file"
    blocker.write_text("x")
    proc = spanassert("--config", str(rules), "--junit", str(blocker / "junit.xml"), str(path))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("spanassert replay: error: --junit")


def test_help_lists_every_option() -> None:
    proc = spanassert("--help")
    assert proc.returncode == 0
    for option in ("--config", "--format", "--junit", "--sarif", "--fail-on-inconclusive", "--skip-invalid",
                   "--strict", "--allow-ineffective-assertions", "--baseline-config", "--settle-spans", "--quiet"):
        assert option in proc.stdout


def test_allow_ineffective_assertions_keeps_a_rule_that_cannot_fail(tmp_path: Path, exported) -> None:
    path, _ = exported
    rules = tmp_path / "rules.yaml"
    rules.write_text("version: 1\ntests:\n  - id: never\n    assertions:\n      - type: trace_must_call_tool\n"
                     "        tool: search\n        min_calls: 0\n", encoding="utf-8")
    refused = spanassert("--config", str(rules), str(path))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    kept = spanassert("--config", str(rules), "--allow-ineffective-assertions", str(path))
    assert kept.returncode == 0, kept.stderr
    assert last_line(kept.stdout) == "3 passed, 0 failed, 0 inconclusive"


def _episode_keys(stdout: str) -> List[str]:
    return [line.split("  key ")[1].split()[0] for line in stdout.splitlines() if line.startswith("trace ")]


def test_settle_spans_does_not_change_verdicts(rules: Path, exported) -> None:
    path, written = exported
    small = spanassert("--config", str(rules), "--settle-spans", "1", str(path))
    assert small.returncode == 1
    assert sorted(_episode_keys(small.stdout)) == sorted(written.trace_ids)
    assert last_line(small.stdout) == "4 passed, 2 failed, 0 inconclusive"
    bad = spanassert("--config", str(rules), "--settle-spans", "0", str(path))
    assert bad.returncode == 2 and "must be at least 1" in bad.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_progress_goes_to_stderr_when_it_is_a_terminal(rules: Path, exported) -> None:
    import pty

    path, _ = exported
    primary, secondary = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "spanassert.cli", "replay", "--config", str(rules), str(path)],
                              stdout=subprocess.PIPE, stderr=secondary, text=True, timeout=120)
        os.close(secondary)
        secondary = -1
        chunks = []
        while True:
            try:
                data = os.read(primary, 4096)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
    finally:
        if secondary != -1:
            os.close(secondary)
        os.close(primary)
    err = b"".join(chunks).decode("utf-8", "replace")
    assert "spanassert replay: 7 spans read, 3 episodes decided" in err
    assert proc.returncode == 1
    assert last_line(proc.stdout) == "4 passed, 2 failed, 0 inconclusive"
