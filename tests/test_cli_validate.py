"""`spanassert validate` and `spanassert schema`, run as the user runs them: as a subprocess."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import List

import jsonschema
import pytest
import yaml

from test_config_seeds import _expected_refusal, _seeds_available, seed_examples

GOOD = """\
version: 1
tests:
  - id: no_deletes
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
"""

BAD = """\
version: 1
tests:
  - id: typo
    assertions:
      - type: trace_must_call_tool
        tool: search
        min_call: 2
"""

UNIT_PASS = """\
version: 1
tests:
  - id: blocklist_policy
    assertions:
      - type: tool_blocklist
        test_tool_calls: [read_file, delete_database]
        policy:
          blocked: [delete_database]
        expect: fail
"""

UNIT_FAIL = UNIT_PASS.replace("expect: fail", "expect: pass")

INEFFECTIVE = """\
version: 1
tests:
  - id: weak
    assertions:
      - {type: trace_must_call_tool, tool: search, min_calls: 0}
"""


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spanassert.cli", *args], cwd=str(cwd), capture_output=True,
                          text=True, encoding="utf-8", timeout=120)


def write(tmp_path: Path, name: str, text: str) -> str:
    (tmp_path / name).write_text(text, encoding="utf-8")
    return name


def test_valid_file_exits_0_with_a_summary(tmp_path: Path) -> None:
    f = write(tmp_path, "good.yaml", GOOD)
    p = run("validate", f, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.strip().splitlines()[-1] == "valid: 1 file, 0 errors, 0 warnings"


def test_config_error_exits_2_with_position_path_and_fix(tmp_path: Path) -> None:
    f = write(tmp_path, "bad.yaml", BAD)
    p = run("validate", f, cwd=tmp_path)
    assert p.returncode == 2
    lines = p.stdout.splitlines()
    assert lines[0] == ("bad.yaml:7:9: error [E_CFG_UNKNOWN_KEY] unknown key `min_call` in `trace_must_call_tool` "
                        "(at tests[0].assertions[0].min_call)")
    assert lines[1] == "    fix: did you mean `min_calls`?"
    assert lines[-1] == "invalid: 1 file, 1 error, 0 warnings"


def test_any_bad_file_among_several_exits_2_and_all_are_reported(tmp_path: Path) -> None:
    good, bad = write(tmp_path, "good.yaml", GOOD), write(tmp_path, "bad.yaml", BAD)
    p = run("validate", good, bad, "missing.yaml", cwd=tmp_path)
    assert p.returncode == 2
    assert "bad.yaml:7:9: error [E_CFG_UNKNOWN_KEY]" in p.stdout
    assert "missing.yaml: error [E_PATH_NOT_FOUND] rules file `missing.yaml` does not exist" in p.stdout
    assert p.stdout.splitlines()[-1] == "invalid: 3 files, 2 errors, 0 warnings"


def test_unit_test_form_meeting_its_expect_is_shown_with_a_check_mark(tmp_path: Path) -> None:
    f = write(tmp_path, "unit.yaml", UNIT_PASS)
    p = run("validate", f, cwd=tmp_path)
    assert p.returncode == 0, p.stdout
    (line,) = [ln for ln in p.stdout.splitlines() if ln.startswith(("✓", "✗"))]
    assert line.startswith("✓ unit.yaml: test `blocklist_policy` tool_blocklist #0: passed")
    assert p.stdout.splitlines()[-1].endswith("unit-test forms 1 passed / 0 failed")


def test_unit_test_form_missing_its_expect_exits_1(tmp_path: Path) -> None:
    f = write(tmp_path, "unit.yaml", UNIT_FAIL)
    p = run("validate", f, cwd=tmp_path)
    assert p.returncode == 1, p.stdout
    (line,) = [ln for ln in p.stdout.splitlines() if ln.startswith(("✓", "✗"))]
    assert line.startswith("✗ unit.yaml: test `blocklist_policy` tool_blocklist #0: failed — ")
    assert "delete_database" in line
    assert p.stdout.splitlines()[-1].startswith("unit-test form failed: 1 file, 0 errors")


def test_config_error_wins_over_unit_failure(tmp_path: Path) -> None:
    p = run("validate", write(tmp_path, "unit.yaml", UNIT_FAIL), write(tmp_path, "bad.yaml", BAD), cwd=tmp_path)
    assert p.returncode == 2


def test_warnings_alone_exit_0(tmp_path: Path) -> None:
    f = write(tmp_path, "vacuous.yaml", "version: 1\ntests:\n  - id: empty\n")
    p = run("validate", f, cwd=tmp_path)
    assert p.returncode == 0
    assert "vacuous.yaml:3:5: warning [W_CFG_VACUOUS_EXPECTED]" in p.stdout
    assert p.stdout.splitlines()[-1] == "valid: 1 file, 0 errors, 1 warning"


def test_ineffective_is_exit_2_unless_allowed(tmp_path: Path) -> None:
    f = write(tmp_path, "weak.yaml", INEFFECTIVE)
    refused = run("validate", f, cwd=tmp_path)
    assert refused.returncode == 2
    assert "error [E_ASSERT_INEFFECTIVE]" in refused.stdout and "--allow-ineffective-assertions" in refused.stdout
    allowed = run("validate", "--allow-ineffective-assertions", f, cwd=tmp_path)
    assert allowed.returncode == 0
    assert "warning [E_ASSERT_INEFFECTIVE]" in allowed.stdout


def test_json_format(tmp_path: Path) -> None:
    good, bad, unit = (write(tmp_path, "good.yaml", GOOD), write(tmp_path, "bad.yaml", BAD),
                       write(tmp_path, "unit.yaml", UNIT_FAIL))
    p = run("validate", "--format", "json", good, bad, unit, cwd=tmp_path)
    assert p.returncode == 2
    report = json.loads(p.stdout)
    assert report["schema"] == "spanassert.validate.v1"
    assert (report["ok"], report["exit_code"]) == (False, 2)
    files = {f["file"]: f for f in report["files"]}
    assert list(files) == ["good.yaml", "bad.yaml", "unit.yaml"]
    assert files["good.yaml"] == {"file": "good.yaml", "ok": True, "diagnostics": [], "unit_results": []}
    (d,) = files["bad.yaml"]["diagnostics"]
    assert d == {"code": "E_CFG_UNKNOWN_KEY", "severity": "error",
                 "message": "unknown key `min_call` in `trace_must_call_tool`", "file": "bad.yaml", "line": 7,
                 "column": 9, "path": "tests[0].assertions[0].min_call", "hint": "did you mean `min_calls`?"}
    assert files["bad.yaml"]["ok"] is False
    (u,) = files["unit.yaml"]["unit_results"]
    assert {k: u[k] for k in ("test", "type", "index", "verdict")} == {
        "test": "blocklist_policy", "type": "tool_blocklist", "index": 0, "verdict": "failed"}
    assert u["message"] and files["unit.yaml"]["ok"] is False

    ok = json.loads(run("validate", "--format", "json", good, cwd=tmp_path).stdout)
    assert (ok["ok"], ok["exit_code"]) == (True, 0)


def test_unit_failure_exit_code_with_a_plugged_in_type(tmp_path: Path) -> None:
    """Exit 1 comes from the registry, not from one type: a type registered by a plugin module works too."""
    (tmp_path / "my_checks.py").write_text(textwrap.dedent("""
        from spanassert.assertions import Assertion, Field, register
        from spanassert.core.model import Outcome

        @register
        class Even(Assertion):
            type_name = "even"
            scope = "unit"
            fields = {"value": Field({"type": "integer"}, required=True)}

            def __init__(self, test_id, index, values, ctx):
                super().__init__(test_id, index, values, ctx)
                self.value = values["value"]

            def evaluate_unit(self):
                return Outcome.passed() if self.value % 2 == 0 else Outcome.failed(f"{self.value} is odd")
    """), encoding="utf-8")
    f = write(tmp_path, "even.yaml", "version: 1\ntests:\n  - id: e\n    assertions:\n"
                                     "      - {type: even, value: 2}\n      - {type: even, value: 3}\n")
    code = ("import sys, my_checks; from spanassert.cli import main; sys.exit(main(sys.argv[1:]))")
    p = subprocess.run([sys.executable, "-c", code, "validate", f], cwd=str(tmp_path), capture_output=True,
                       text=True, encoding="utf-8", timeout=120, env={**__import__("os").environ,
                                                                    "PYTHONPATH": str(tmp_path)})
    assert p.returncode == 1, p.stdout + p.stderr
    marks = [ln[:1] for ln in p.stdout.splitlines() if ln.startswith(("✓", "✗"))]
    assert marks == ["✓", "✗"]
    assert "3 is odd" in p.stdout


def test_usage_errors_exit_2_and_help_exits_0(tmp_path: Path) -> None:
    assert run(cwd=tmp_path).returncode == 2
    assert run("validate", cwd=tmp_path).returncode == 2
    assert run("validate", "--format", "xml", "a.yaml", cwd=tmp_path).returncode == 2
    h = run("validate", "--help", cwd=tmp_path)
    assert h.returncode == 0 and "--allow-ineffective-assertions" in h.stdout


# -- schema ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def printed_schema(tmp_path_factory: pytest.TempPathFactory) -> dict:
    p = run("schema", cwd=tmp_path_factory.mktemp("schema"))
    assert p.returncode == 0, p.stderr
    schema = json.loads(p.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


def _errors(schema: dict, text: str) -> List[str]:
    instance = json.loads(json.dumps(yaml.safe_load(text)))
    return [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(instance)]


def test_schema_command_prints_a_schema_that_validates_the_examples(printed_schema: dict) -> None:
    assert printed_schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    for text in (GOOD, UNIT_PASS, UNIT_FAIL):
        assert _errors(printed_schema, text) == []
    _seeds_available()
    examples, _ = seed_examples()
    for example in examples:
        if _expected_refusal(example) is None:
            assert _errors(printed_schema, example.rules_file) == [], example.source


def test_schema_command_output_rejects_unknown_keys(printed_schema: dict) -> None:
    assert _errors(printed_schema, BAD)
    assert _errors(printed_schema, GOOD + "extra: 1\n")


def test_schema_is_usable_from_an_editor_modeline(printed_schema: dict, tmp_path: Path) -> None:
    (tmp_path / "spanassert.schema.json").write_text(json.dumps(printed_schema), encoding="utf-8")
    f = write(tmp_path, "rules.yaml", "# yaml-language-server: $schema=./spanassert.schema.json\n" + GOOD)
    # The modeline is a comment: the file still validates, in the CLI and against the schema.
    assert run("validate", f, cwd=tmp_path).returncode == 0
    assert _errors(printed_schema, (tmp_path / f).read_text(encoding="utf-8")) == []
