"""`$ref` in a rules file's schemas resolves only within the schema that holds it: nothing is fetched
and no file is opened, and a reference that does not resolve is refused at load, at its position
(issue 12, situation 10). Run as a user runs it: `spanassert validate` and `spanassert replay` as
subprocesses, over files written by the real SDK."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from replay_episodes import write_episodes

RULES = """\
version: 1
tests:
  - id: refund-args
    assertions:
      - type: trace_args_valid
        tool: refund
        schema:
          type: object
          properties:
            amount:
              $ref: {ref}
          required: [amount]
          $defs:
            amount: {{type: number, maximum: 100}}
"""


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spanassert.cli", *args], cwd=str(cwd), capture_output=True,
                          text=True, encoding="utf-8", timeout=120)


@pytest.mark.parametrize("ref, why", [
    ("'https://schemas.invalid/amount.json'", "not within this schema"),
    ("'amount.json'", "not within this schema"),
    ("'file:///etc/passwd'", "not within this schema"),
    ("'#/$defs/nothing'", "points to nothing in this schema"),
])
def test_validate_refuses_a_ref_that_does_not_resolve_within_the_schema_at_its_position(
        tmp_path: Path, ref: str, why: str) -> None:
    # A file the relative reference would name exists: it must still not be read.
    (tmp_path / "amount.json").write_text(json.dumps({"type": "number"}), encoding="utf-8")
    (tmp_path / "rules.yaml").write_text(RULES.format(ref=ref), encoding="utf-8")
    p = cli("validate", "rules.yaml", cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    line = next(x for x in p.stdout.splitlines() if "E_CFG_SCHEMA_REF" in x)
    # file:line:column of the `$ref` value (line 11 of the file, after `$ref: `).
    assert line.startswith("rules.yaml:11:21: error [E_CFG_SCHEMA_REF]"), line
    assert why in line and "tests[0].assertions[0].schema.properties.amount.$ref" in line
    assert "Traceback" not in p.stderr


def test_local_refs_resolve_without_any_retrieval_and_judge_the_calls(tmp_path: Path) -> None:
    # A pointer into `$defs`, and an absolute `$id` of a subschema (on a host that does not exist:
    # resolving it by fetching would fail) both resolve within the schema.
    rules = RULES.format(ref="'#/$defs/amount'").replace(
        "amount: {type: number, maximum: 100}",
        "amount: {$ref: 'https://schemas.invalid/money'}\n"
        "            money: {$id: 'https://schemas.invalid/money', type: number, maximum: 100}")
    (tmp_path / "rules.yaml").write_text(rules, encoding="utf-8")
    p = cli("validate", "rules.yaml", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    traces = tmp_path / "t.jsonl"
    written = write_episodes(traces, [[("refund", {"amount": 20})], [("refund", {"amount": 500})]])
    p = cli("replay", "--config", "rules.yaml", "--format", "json", str(traces), cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    doc = json.loads(p.stdout)
    verdicts = {e["key"]: [r["verdict"] for r in e["results"]] for e in doc["episodes"]}
    assert verdicts == {written.trace_ids[0]: ["passed"], written.trace_ids[1]: ["failed"]}
    assert "Traceback" not in p.stderr
