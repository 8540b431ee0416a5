"""A rules file is code (issue 14, item 13): `settings.embedder` names a function to import, and
policy files are read from disk. `--untrusted` (for a rules file from a pull request) loads a file
without importing anything or reading outside its folder, in `validate` and `replay` (both
`--config` and `--baseline-config`). Run as subprocesses, as CI runs them."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

from replay_episodes import write_episodes

EVIL = """\
from pathlib import Path
Path(__file__).with_name("IMPORTED").write_text("the rules file ran this module")

def embed(text):
    return [1.0, 0.0]
"""

EMBEDDER_RULES = """\
version: 1
settings:
  embedder: {embedder}
tests:
  - id: similar
    expected:
      type: semantic_similarity_to
      semantic_similarity_to: "touch PWNED"
"""

GOOD_RULES = """\
version: 1
tests:
  - id: no-delete
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
"""

POLICY_RULES = """\
version: 1
tests:
  - id: refund-args
    expected:
      type: args_valid
      policy: {policy}
"""


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(cwd)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return subprocess.run([sys.executable, "-m", "spanassert.cli", *args], cwd=str(cwd), capture_output=True,
                          text=True, encoding="utf-8", timeout=120, env=env)


@pytest.fixture()
def evil(tmp_path: Path) -> Path:
    (tmp_path / "evil.py").write_text(EVIL, encoding="utf-8")
    (tmp_path / "pr.yaml").write_text(EMBEDDER_RULES.format(embedder="evil:embed"), encoding="utf-8")
    (tmp_path / "good.yaml").write_text(GOOD_RULES, encoding="utf-8")
    return tmp_path


def untrusted_errors(stdout: str) -> List[str]:
    return [line for line in stdout.splitlines() if "[E_CFG_UNTRUSTED]" in line]


def test_trusted_loading_imports_the_embedder_the_rules_file_names(evil: Path) -> None:
    # What the trust model is about: loading the file ran code it named.
    p = cli("validate", "pr.yaml", cwd=evil)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (evil / "IMPORTED").exists()


def test_validate_untrusted_refuses_the_embedder_without_importing_it(evil: Path) -> None:
    p = cli("validate", "--untrusted", "pr.yaml", cwd=evil)
    assert p.returncode == 2, p.stdout + p.stderr
    assert not (evil / "IMPORTED").exists()
    [line] = untrusted_errors(p.stdout)
    assert line.startswith("pr.yaml:3:13: error [E_CFG_UNTRUSTED] `settings.embedder: 'evil:embed'` names Python code")
    # The shell-command form from the issue is refused the same way.
    (evil / "os.yaml").write_text(EMBEDDER_RULES.format(embedder="os:system"), encoding="utf-8")
    p = cli("validate", "--untrusted", "--format", "json", "os.yaml", cwd=evil)
    assert p.returncode == 2
    codes = [d["code"] for d in json.loads(p.stdout)["files"][0]["diagnostics"]]
    assert "E_CFG_UNTRUSTED" in codes
    assert not (evil / "PWNED").exists()


def test_replay_untrusted_refuses_a_baseline_or_config_that_names_code(evil: Path) -> None:
    traces = evil / "t.jsonl"
    write_episodes(traces, [[("search", {"q": "x"})]])
    for args in (["--config", "pr.yaml"], ["--config", "good.yaml", "--baseline-config", "pr.yaml"]):
        p = cli("replay", "--untrusted", *args, str(traces), cwd=evil)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert "[E_CFG_UNTRUSTED]" in p.stderr
        assert not (evil / "IMPORTED").exists(), args
    p = cli("replay", "--untrusted", "--config", "good.yaml", str(traces), cwd=evil)
    assert p.returncode == 0, p.stdout + p.stderr


def test_untrusted_reads_policy_files_only_inside_the_rules_files_folder(tmp_path: Path) -> None:
    rules_dir = tmp_path / "rules"
    (rules_dir / "policies").mkdir(parents=True)
    policy = json.dumps({"refund": {"properties": {"amount": {"maximum": 100}}}})
    (rules_dir / "policies" / "refund.json").write_text(policy, encoding="utf-8")
    outside = tmp_path / "secret.json"
    outside.write_text(policy, encoding="utf-8")
    (rules_dir / "link.json").symlink_to(outside)
    cases: Dict[str, bool] = {"policies/refund.json": True, "../secret.json": False, str(outside): False,
                              "link.json": False, "policies/../../secret.json": False}
    for i, (path, allowed) in enumerate(cases.items()):
        name = f"r{i}.yaml"
        (rules_dir / name).write_text(POLICY_RULES.format(policy=json.dumps(path)), encoding="utf-8")
        trusted = cli("validate", name, cwd=rules_dir)
        assert trusted.returncode == 0, (path, trusted.stdout)
        p = cli("validate", "--untrusted", name, cwd=rules_dir)
        if allowed:
            assert p.returncode == 0, (path, p.stdout)
        else:
            assert p.returncode == 2, (path, p.stdout)
            [line] = untrusted_errors(p.stdout)
            assert line.startswith(f"{name}:6:15: error [E_CFG_UNTRUSTED]") and "outside the rules file's folder" in line


def test_untrusted_never_retrieves_a_schema_reference(tmp_path: Path) -> None:
    (tmp_path / "other.json").write_text(json.dumps({"type": "number"}), encoding="utf-8")
    (tmp_path / "r.yaml").write_text(POLICY_RULES.replace("policy: {policy}", "schema: {refund: {$ref: 'other.json'}}"),
                                     encoding="utf-8")
    for flags in ([], ["--untrusted"]):
        p = cli("validate", *flags, "r.yaml", cwd=tmp_path)
        assert p.returncode == 2 and "[E_CFG_SCHEMA_REF]" in p.stdout, p.stdout
