"""Issue 12, situation 8: a rules file whose own unit-test forms contradict their `expect` is
reported by `validate` and refused the same way by every other door: `replay` and `serve` exit 1
before reading input, with `validate`'s words; the processor (real SDK), `check()` and the pytest
marker raise (or fail with) `ConfigError`."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

RULES = """\
version: 1
tests:
  - id: no-db-delete
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
  - id: blocklist_policy
    assertions:
      - type: tool_blocklist
        test_tool_calls: [read_file, delete_database]
        policy:
          blocked: [delete_database]
        expect: pass
"""


def cli(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("SPANASSERT_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "spanassert.cli", *args], cwd=str(cwd), capture_output=True,
                          text=True, encoding="utf-8", timeout=timeout, env=env)


@pytest.fixture()
def rules(tmp_path: Path) -> Path:
    p = tmp_path / "rules.yaml"
    p.write_text(RULES, encoding="utf-8")
    return p


def _validate_line(tmp_path: Path) -> str:
    p = cli("validate", "rules.yaml", cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    (line,) = [ln for ln in p.stdout.splitlines() if ln.startswith("✗")]
    assert line.startswith("✗ rules.yaml: test `blocklist_policy` tool_blocklist #0: failed — ")
    return line


def test_replay_exits_1_before_reading_input_with_validates_message(rules: Path, tmp_path: Path) -> None:
    line = _validate_line(tmp_path)
    # The input does not exist: reading it would be exit 2 with "no such file".
    p = cli("replay", "--config", "rules.yaml", "never-written.jsonl", cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    assert line in p.stderr.splitlines()
    assert "unit-test form(s) of the rules file failed" in p.stderr and "spanassert validate rules.yaml" in p.stderr
    assert "no such file" not in p.stderr and p.stdout == ""


def test_serve_exits_1_before_listening_with_validates_message(rules: Path, tmp_path: Path) -> None:
    line = _validate_line(tmp_path)
    p = cli("serve", "--config", "rules.yaml", "--grpc-endpoint", "127.0.0.1:0", "--http-endpoint", "127.0.0.1:0",
            cwd=tmp_path, timeout=60)
    assert p.returncode == 1, p.stdout + p.stderr
    assert line in p.stderr.splitlines() and "not started" in p.stderr


def test_processor_and_check_raise_config_error(rules: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    from spanassert import AssertionSpanProcessor, ConfigError, load_config
    from spanassert.trace import Trace, check

    config = load_config(rules)  # validate's view: loads, with the failed form recorded
    assert [t.id for t, _, _ in config.unit_failures] == ["blocklist_policy"]
    for given in (str(rules), config):
        with pytest.raises(ConfigError) as info:
            AssertionSpanProcessor(given)
        assert info.value.diagnostics[0].code == "E_UNIT_FORM_FAILED"
        assert "test `blocklist_policy` tool_blocklist #0: unit-test form failed" in str(info.value)
        assert f"{rules}:9:9" in str(info.value)  # the form's own position in the file
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("invoke_agent ops", attributes={"gen_ai.operation.name": "invoke_agent"}):
        with tracer.start_as_current_span("execute_tool read_file", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read_file"}):
            pass
    spans = Trace.from_spans(exporter.get_finished_spans())
    assert [c.name for c in spans.tool_calls] == ["read_file"]
    for given in (str(rules), config):
        with pytest.raises(ConfigError, match="E_UNIT_FORM_FAILED"):
            check(spans, given)


def test_pytest_marker_refuses_the_rules_file(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", rules=RULES)
    pytester.makepyfile(test_inner=textwrap.dedent("""
        import pytest

        @pytest.mark.spanassert(config="rules.yaml")
        def test_agent():
            pass
    """))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*E_UNIT_FORM_FAILED*test `blocklist_policy` tool_blocklist #0: unit-test form failed*"])


def test_serve_and_mcp_proxy_refuse_a_rules_file_in_one_wording(rules: Path, tmp_path: Path) -> None:
    # config.load_to_run is how serve and mcp-proxy load the file they judge by: each problem on its
    # line, then one `prog: path: ...` line, exit 1 for failed unit-test forms, 2 otherwise.
    import io

    from spanassert.config import load_to_run

    err = io.StringIO()
    assert load_to_run(str(rules), "spanassert serve", err) == (None, 1)
    *listed, last = err.getvalue().splitlines()
    assert listed == [_validate_line(tmp_path).replace("rules.yaml", str(rules))]
    assert last == (f"spanassert serve: {rules}: 1 unit-test form(s) of the rules file failed (listed above), not "
                    f"started; fix them (`spanassert validate {rules}` runs them alone)")
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\ntests:\n  - id: x\n    assertions:\n      - type: trace_nope\n", encoding="utf-8")
    err = io.StringIO()
    assert load_to_run(str(bad), "spanassert mcp-proxy", err) == (None, 2)
    *listed, last = err.getvalue().splitlines()
    assert listed and all("trace_nope" in line for line in listed[:1])
    assert last == (f"spanassert mcp-proxy: {bad}: invalid rules file (problems listed above), not started; "
                    f"`spanassert validate {bad}` checks it alone")
    err = io.StringIO()
    assert load_to_run(str(tmp_path / "none.yaml"), "spanassert serve", err) == (None, 2)
    assert "E_PATH_NOT_FOUND" in err.getvalue() and "invalid rules file (problems listed above)" in err.getvalue()
    good = tmp_path / "good.yaml"
    good.write_text("version: 1\ntests:\n  - id: a\n    assertions:\n      - type: trace_must_not_call_tool\n"
                    "        tool: delete_database\n", encoding="utf-8")
    err = io.StringIO()
    config, code = load_to_run(str(good), "spanassert serve", err)
    assert config is not None and code == 0 and err.getvalue() == ""
