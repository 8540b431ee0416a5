"""`spanassert replay --test/--tag/--since/--until` through a subprocess: a subset of the rules,
and only the episodes of a time window (what the alert's `replay` annotation runs)."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from replay_episodes import write_episodes
from test_replay_cli import spanassert

RULES = """\
version: 1
tests:
  - id: no-db-delete
    severity: critical
    tags: [safety]
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
  - id: must-search
    severity: warning
    tags: [quality]
    assertions:
      - type: trace_must_call_tool
        tool: search
  - id: no-shell
    tags: [safety]
    assertions:
      - type: trace_must_not_call_tool
        tool: run_shell
"""

EPISODES = [
    [("search", {"q": "db"}), ("delete_database", {"name": "prod"})],
    [("lookup", {"id": 7})],
]


@pytest.fixture()
def files(tmp_path: Path) -> "tuple[Path, Path]":
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    traces = tmp_path / "traces.jsonl"
    write_episodes(traces, EPISODES)
    return rules, traces


def _tests_run(stdout: str) -> set:
    doc = json.loads(stdout)
    return {r["test"] for ep in doc["episodes"] for r in ep["results"]}


def test_test_option_runs_only_the_named_tests(files: "tuple[Path, Path]") -> None:
    rules, traces = files
    done = spanassert(str(traces), "-c", str(rules), "--test", "must-search", "--format", "json")
    assert done.returncode == 1, done.stderr
    assert _tests_run(done.stdout) == {"must-search"}
    done = spanassert(str(traces), "-c", str(rules), "--test", "must-search", "--test", "no-shell", "--format", "json")
    assert _tests_run(done.stdout) == {"must-search", "no-shell"}
    assert not json.loads(done.stdout)["violations"] or all(
        v["test_id"] != "no-db-delete" for v in json.loads(done.stdout)["violations"])


def test_tag_option_runs_the_tagged_tests(files: "tuple[Path, Path]") -> None:
    rules, traces = files
    done = spanassert(str(traces), "-c", str(rules), "--tag", "safety", "--format", "json")
    assert _tests_run(done.stdout) == {"no-db-delete", "no-shell"}
    assert done.returncode == 1


def test_unknown_test_id_or_tag_is_a_usage_error_with_the_choices(files: "tuple[Path, Path]") -> None:
    rules, traces = files
    done = spanassert(str(traces), "-c", str(rules), "--test", "no-db-delet")
    assert done.returncode == 2
    assert "did you mean 'no-db-delete'" in done.stderr and "must-search" in done.stderr
    done = spanassert(str(traces), "-c", str(rules), "--tag", "speed")
    assert done.returncode == 2
    assert "quality, safety" in done.stderr


def test_time_window_keeps_only_the_episodes_inside_it(files: "tuple[Path, Path]") -> None:
    rules, traces = files
    now = time.time()
    inside = spanassert(str(traces), "-c", str(rules), "--since", f"{now - 3600:.0f}", "--until", f"{now + 60:.0f}",
                        "--format", "json")
    assert inside.returncode == 1
    doc = json.loads(inside.stdout)
    assert doc["summary"]["episodes"] == 2 and doc["violations"]
    # A window holding no episode is not a pass: exit 2, saying when the episodes are.
    before = spanassert(str(traces), "-c", str(rules), "--until", "2020-01-01T00:00:00Z")
    assert before.returncode == 2, before.stderr
    assert "2 episode(s) were judged but none falls in the --since/--until window" in before.stderr
    assert "their traces run from 20" in before.stderr
    allowed = spanassert(str(traces), "-c", str(rules), "--until", "2020-01-01T00:00:00Z", "--allow-empty",
                         "--format", "json")
    assert allowed.returncode == 0, allowed.stderr
    doc = json.loads(allowed.stdout)
    assert doc["summary"]["episodes"] == 0 and doc["violations"] == []
    bad = spanassert(str(traces), "-c", str(rules), "--since", "yesterday")
    assert bad.returncode == 2 and "ISO 8601" in bad.stderr


def test_times_and_job_counts_out_of_range_are_usage_errors_that_say_the_range(files: "tuple[Path, Path]") -> None:
    # fuzz8: `--since 1e400` ended in an OverflowError traceback with exit 1 (a "failed" run);
    # `--since 1e22` and `--until -5` said "--since is after --until; swap them" with one of them
    # not given; `--jobs 99999999999999999999` went on forking processes.
    rules, traces = files
    for args, said in [(("--since", "1e400"), "'1e400' is out of range: Unix seconds from 0 (1970) to 18446744073"),
                       (("--since", "1e22"), "'1e22' is out of range"), (("--until", "-5"), "'-5' is out of range"),
                       (("--until", "9999-01-01"), "'9999-01-01' is out of range: a time from 1970 to 2554"),
                       (("--jobs", "99999999999999999999"), "at most 256 processes, got 99999999999999999999")]:
        proc = spanassert(str(traces), "-c", str(rules), *args)
        assert proc.returncode == 2, proc.stderr
        assert said in proc.stderr and "Traceback" not in proc.stderr and "swap them" not in proc.stderr
    # The widest window there is still judges everything.
    proc = spanassert(str(traces), "-c", str(rules), "--since", "0", "--until", "2554-01-01", "--format", "json")
    assert proc.returncode == 1 and json.loads(proc.stdout)["summary"]["episodes"] == 2
