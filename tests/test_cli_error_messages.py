"""Errors a newcomer hits, through `spanassert validate` in a subprocess: each names the place
(file:line:column of the offending key), says what was expected in plain words and suggests a
fix that keeps the intent."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-m", "spanassert.cli", "validate"]


def validate(tmp_path: Path, text: str) -> "tuple[int, str]":
    path = tmp_path / "rules.yaml"
    path.write_text(text, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    done = subprocess.run(CLI + [str(path)], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    return done.returncode, done.stdout + done.stderr


def test_unknown_type_suggests_a_name_with_the_same_intent_and_lists_the_family(tmp_path: Path) -> None:
    code, out = validate(tmp_path, """\
version: 1
tests:
  - id: t
    assertions:
      - type: trace_must_call_tools_never
        tool: delete_database
""")
    assert code == 2
    assert "rules.yaml:5:15: error [E_CFG_UNKNOWN_TYPE]" in out
    # Not the nearest spelling (`trace_must_call_tool`, the opposite rule) but the one that forbids.
    assert "did you mean `trace_must_not_call_tool`?" in out, out
    assert "Related types:" in out and "`tool_blocklist`" in out and "`trace_must_call_tool`" in out


def test_unknown_type_by_topic_word(tmp_path: Path) -> None:
    code, out = validate(tmp_path, """\
version: 1
tests:
  - id: t
    assertions:
      - type: trace_tool_order
        sequence: [a, b]
""")
    assert code == 2 and "did you mean `trace_tool_sequence`?" in out, out


def test_misspelt_json_schema_keyword_is_pointed_at_with_the_right_spelling(tmp_path: Path) -> None:
    code, out = validate(tmp_path, """\
version: 1
tests:
  - id: refund-limit
    assertions:
      - type: trace_args_valid
        tool: issue_refund
        schema:
          type: object
          properties:
            amount: {type: number, maximun: 500}
          requird: [amount]
""")
    # Before: accepted silently (JSON Schema ignores unknown keywords): no limit was ever checked.
    assert code == 2, out
    assert "rules.yaml:10:36: error [E_CFG_SCHEMA]" in out and "`maximun`; did you mean `maximum`?" in out, out
    assert "rules.yaml:11:11: error [E_CFG_SCHEMA]" in out and "`requird`; did you mean `required`?" in out
    assert "schema.properties.amount.maximun" in out


def test_invalid_schema_value_is_explained_at_its_key(tmp_path: Path) -> None:
    code, out = validate(tmp_path, """\
version: 1
tests:
  - id: t
    assertions:
      - type: trace_args_valid
        tool: issue_refund
        schema:
          type: object
          properties:
            amount:
              type: numbr
""")
    assert code == 2
    # Before: "'numbr' is not valid under any of the given schemas", at the schema's first line.
    assert "rules.yaml:11:21: error [E_CFG_SCHEMA]" in out, out
    assert "`type` must be one of array, boolean, integer, null, number, object, string" in out
    assert "did you mean `number`?" in out
    assert "is not valid under any of the given schemas" not in out


def test_wrong_indentation_says_what_the_parser_expected_in_plain_words(tmp_path: Path) -> None:
    code, out = validate(tmp_path, """\
version: 1
tests:
  - id: t
    assertions:
      - type: trace_must_not_call_tool
       tool: delete_database
""")
    assert code == 2
    assert "rules.yaml:6:8: error [E_CFG_PARSE]" in out
    assert ("line 6 is indented to column 8, but the list that starts at line 5 has its items (`- `) at column 7"
            in out), out
    assert "indented to column 9" in out


def test_serve_lists_every_option_out_of_bounds_at_once_then_exits_2(tmp_path: Path) -> None:
    # Each bound is checked (NaN seconds included) and all are reported, in the options' order, before
    # anything listens.
    rules = tmp_path / "rules.yaml"
    rules.write_text("version: 1\ntests:\n  - id: t\n    assertions:\n      - type: trace_must_not_call_tool\n"
                     "        tool: delete_database\n", encoding="utf-8")
    args = ["serve", "--config", str(rules), "--grpc-endpoint", "127.0.0.1:0", "--http-endpoint", "127.0.0.1:0",
            "--max-request-bytes", "0", "--queue-size", "-1", "--max-connections", "0", "--max-trace-spans", "0",
            "--max-trace-seconds", "nan", "--engine-stall-timeout", "0", "--settle", "-1"]
    done = subprocess.run([sys.executable, "-m", "spanassert.cli", *args], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "spanassert serve: --max-request-bytes 0: must be at least 1",
        "spanassert serve: --queue-size -1: must be at least 1",
        "spanassert serve: --max-connections 0: must be at least 1",
        "spanassert serve: --max-trace-spans 0: must be at least 1",
        "spanassert serve: --max-trace-seconds nan: must be > 0 seconds",
        "spanassert serve: --engine-stall-timeout 0.0: must be > 0 seconds",
        "spanassert serve: --settle -1.0: must be >= 0 seconds",
    ]
