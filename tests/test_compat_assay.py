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


def _write_trace(path: Path, episodes: "list[tuple[str, list[str]]]") -> None:
    """One episode per (user prompt, tool names): an agent span carrying the prompt as
    `gen_ai.input.messages`, with one tool span per call. Written by the real SDK + file exporter."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from otlp_file_exporter import FileSpanExporter

    exporter = FileSpanExporter(str(path))
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    t = tp.get_tracer("compat")
    for prompt, tools in episodes:
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}
        if prompt:
            attributes["gen_ai.input.messages"] = json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": prompt}]}])
        with t.start_as_current_span("invoke_agent support", attributes=attributes):
            for name in tools:
                with t.start_as_current_span(f"execute_tool {name}", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                        "gen_ai.tool.call.arguments": "{}"}):
                    pass
    tp.shutdown()


BOTH = """\
version: 1
tests:
  - id: refund_flow
    expected:
      type: tool_blocklist
      blocked: [delete_database]
    assertions:
      - type: trace_must_call_tool
        tool: issue_refund
      - type: trace_must_call_tool
        tool: lookup_order
"""


def test_expected_and_first_assertion_have_a_coverage_row_each(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(BOTH)
    trace = tmp_path / "t.jsonl"
    _write_trace(trace, [("Where is my order?", ["lookup_order"])])
    p = run("replay", "-c", str(rules), "--format", "json", str(trace), cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr  # issue_refund was not called
    report = json.loads(p.stdout)
    rows = [(c["type"], c["index"], c["passed"], c["failed"], c["applied"]) for c in report["coverage"]
            if c["test"] == "refund_flow"]
    # one row per check, each counting its own one episode: `expected:` first, then `assertions:` in order
    assert rows == [("tool_blocklist", 0, 1, 0, 1), ("trace_must_call_tool", 1, 0, 1, 1),
                    ("trace_must_call_tool", 2, 1, 0, 1)], rows
    results = [(r["type"], r["index"], r["verdict"]) for ep in report["episodes"] for r in ep["results"]]
    assert sorted(results) == [("tool_blocklist", 0, "passed"), ("trace_must_call_tool", 1, "failed"),
                               ("trace_must_call_tool", 2, "passed")]
    violations = report["violations"]
    assert [(v["assertion_type"], v["assertion_index"]) for v in violations] == [("trace_must_call_tool", 1)]
    text = run("replay", "-c", str(rules), str(trace), cwd=tmp_path).stdout
    cov = text[text.index("Coverage"):]
    assert "refund_flow tool_blocklist #0" in cov and "refund_flow trace_must_call_tool #1" in cov


PROMPTS = """\
version: 1
tests:
  - id: weather
    input:
      prompt: "What is the weather in Tokyo?"
    assertions:
      - type: trace_must_call_tool
        tool: lookup_order
  - id: refund
    input:
      prompt: "Refund order 7"
    assertions:
      - type: trace_must_call_tool
        tool: lookup_order
"""


def test_a_test_whose_prompt_names_no_episode_is_reported(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(PROMPTS)
    trace = tmp_path / "t.jsonl"
    _write_trace(trace, [("Refund order 7", ["lookup_order"])])
    p = run("replay", "-c", str(rules), "--format", "json", str(trace), cwd=tmp_path)
    # our decision: the verdicts stand (every test is judged on every episode; `match:` selects),
    # so the exit code follows them; the report names the test whose prompt matched no episode
    assert p.returncode == 0, p.stdout + p.stderr
    report = json.loads(p.stdout)
    assert [(u["test"], u["prompt"]) for u in report["unmatched_inputs"]] == [
        ("weather", "What is the weather in Tokyo?")]
    assert "1 trace(s) recorded a user message" in report["unmatched_inputs"][0]["reason"]
    text = run("replay", "-c", str(rules), str(trace), cwd=tmp_path).stdout
    assert "weather: input.prompt 'What is the weather in Tokyo?' names no episode in the input" in text
    assert "refund: input.prompt" not in text


def test_prompts_that_were_never_recorded_are_reported_as_unmatchable(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(PROMPTS)
    trace = tmp_path / "t.jsonl"
    _write_trace(trace, [("", ["lookup_order"])])  # no user message recorded (content capture off)
    p = run("replay", "-c", str(rules), "--format", "json", str(trace), cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    unmatched = json.loads(p.stdout)["unmatched_inputs"]
    assert [u["test"] for u in unmatched] == ["weather", "refund"]
    assert all("no span recorded a user message" in u["reason"] for u in unmatched)


# -- input.context as a list (Assay's runtime: TestInput.context is Option<Vec<String>>) ---------------
@pytest.mark.parametrize("context, ok", [
    ('["policy: no refunds", "customer: gold"]', True),  # Assay's runtime form
    ('"policy: no refunds"', True),  # the seed's documented form
    ("~", True),
    ("[1, 2]", False),
    ("{a: b}", False),
])
def test_input_context_may_be_a_list_of_strings(tmp_path: Path, context: str, ok: bool) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("version: 1\ntests:\n  - id: t\n    input:\n      prompt: hi\n"
                     f"      context: {context}\n    assertions:\n      - type: trace_must_call_tool\n        tool: a\n")
    p = run("validate", str(rules), cwd=tmp_path)
    assert p.returncode == (0 if ok else 2), p.stdout + p.stderr
    if not ok:
        assert "input.context" in p.stdout + p.stderr


# -- legacy v0 files: `spanassert migrate FILE` (the shape read from Assay's migrate source) ------------
V0 = """\
suite: legacy-migration
model: dummy
settings:
  embedder: embed:embed
tests:
  - id: args
    input: {prompt: hi}
    expected:
      type: args_valid
      policy: policies/args.yaml
  - id: seq
    input: {prompt: hi}
    expected:
      type: sequence_valid
      policy: policies/seq.yaml
  - id: rules
    input: {prompt: hi}
    expected:
      type: sequence_valid
      policy: policies/rules.yaml
  - id: ref
    input: {prompt: hi}
    expected:
      $ref: policies/ref.yaml
  - id: scalar
    input: {prompt: hi}
    expected:
      - must_contain: "Paris"
  - id: similar
    input: {prompt: hi}
    expected:
      type: semantic_similarity_to
      text: Paris is the capital
      threshold: 0.5
"""


def _run_here(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``run`` with ``cwd`` importable (the rules' embedder module lives there)."""
    import os

    return subprocess.run([sys.executable, "-m", "spanassert.cli", *args], cwd=str(cwd), capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(cwd)})


def _v0(tmp_path: Path) -> Path:
    pol = tmp_path / "policies"
    pol.mkdir()
    (pol / "args.yaml").write_text("Search:\n  type: object\n  properties:\n    foo: {type: string}\n  required: [foo]\n")
    (pol / "seq.yaml").write_text("- lookup_order\n- create_return\n")
    (pol / "rules.yaml").write_text("version: '1'\nsequences:\n  - type: before\n    first: auth\n    then: pay\n")
    (pol / "ref.yaml").write_text("type: args_valid\npolicy: args.yaml\n")  # relative to the referenced file
    (tmp_path / "embed.py").write_text("def embed(text):\n    return [1.0, float(len(text))]\n")
    rules = tmp_path / "eval.yaml"
    rules.write_text(V0)
    return rules


def test_a_v0_file_is_refused_with_a_pointer_to_migrate(tmp_path: Path) -> None:
    rules = _v0(tmp_path)
    p = _run_here("validate", str(rules), cwd=tmp_path)
    out = p.stdout + p.stderr
    assert p.returncode == 2 and "E_CFG_VERSION" in out and "legacy v0" in out
    assert f"spanassert migrate {rules}" in out
    assert "E_CFG_LEGACY_REF" in out  # the $ref block points to migrate too
    assert out.count("spanassert migrate") == 2
    rules.write_text("version: 0\n" + V0)
    p = _run_here("validate", str(rules), cwd=tmp_path)
    assert p.returncode == 2 and f"spanassert migrate {rules}" in p.stdout + p.stderr


def test_migrate_writes_the_v1_form_assay_writes(tmp_path: Path) -> None:
    import yaml

    rules = _v0(tmp_path)
    check = _run_here("migrate", "--check", str(rules), cwd=tmp_path)
    assert check.returncode == 2 and "needs migrating" in check.stdout and rules.read_text() == V0
    dry = _run_here("migrate", "--dry-run", str(rules), cwd=tmp_path)
    assert dry.returncode == 0 and rules.read_text() == V0 and yaml.safe_load(dry.stdout)["version"] == 1
    p = _run_here("migrate", str(rules), cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (tmp_path / "eval.yaml.bak").read_text() == V0  # Assay's backup name
    data = yaml.safe_load(rules.read_text())
    assert data["version"] == 1 and data["suite"] == "legacy-migration"
    exp = {t["id"]: t["expected"] for t in data["tests"]}
    schema = {"Search": {"type": "object", "properties": {"foo": {"type": "string"}}, "required": ["foo"]}}
    assert exp["args"] == {"type": "args_valid", "schema": schema}
    assert exp["seq"] == {"type": "sequence_valid", "sequence": ["lookup_order", "create_return"]}
    assert exp["rules"] == {"type": "sequence_valid", "rules": [{"type": "before", "first": "auth", "then": "pay"}]}
    assert exp["ref"] == {"type": "args_valid", "schema": schema}  # $ref inlined, its policy path resolved
    assert exp["scalar"] == {"type": "must_contain", "must_contain": ["Paris"]}
    assert exp["similar"] == {"type": "semantic_similarity_to", "semantic_similarity_to": "Paris is the capital",
                              "min_score": 0.5}
    # the migrated file loads and needs nothing more
    valid = _run_here("validate", str(rules), cwd=tmp_path)
    assert valid.returncode == 0, valid.stdout + valid.stderr
    again = _run_here("migrate", str(rules), cwd=tmp_path)
    assert again.returncode == 0 and "nothing to migrate" in again.stdout


def test_migrate_refuses_what_has_no_v1_form_and_writes_nothing(tmp_path: Path) -> None:
    rules = tmp_path / "eval.yaml"
    original = "suite: s\nmodel: m\npolicies: [{type: x}]\ntests: [{id: t, input: hi}]\n"
    rules.write_text(original)
    p = run("migrate", str(rules), cwd=tmp_path)
    assert p.returncode == 2 and "`policies:`" in p.stderr and rules.read_text() == original
    # a result that would not load is not written (here: an unknown expected type)
    original = "suite: s\nmodel: m\ntests:\n  - id: t\n    expected: {type: must_contian, must_contain: [a]}\n"
    rules.write_text(original)
    p = run("migrate", str(rules), cwd=tmp_path)
    assert p.returncode == 2 and "does not load" in p.stderr and "must_contian" in p.stderr
    assert rules.read_text() == original and not (tmp_path / "eval.yaml.bak").exists()
    assert not list(tmp_path.glob(".*.tmp"))


def test_migrate_keeps_a_structured_policy_referenced(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text("version: '2.0'\ntools:\n  deny: [exec]\n")
    rules = tmp_path / "eval.yaml"
    rules.write_text("tests:\n  - id: t\n    expected: {type: args_valid, policy: policy.yaml}\n")
    p = run("migrate", str(rules), cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "structured (v2) policy" in p.stderr and "policy: policy.yaml" in rules.read_text()


# -- semantic_similarity_to reads precomputed embeddings from the trace (Assay: meta.assay.embeddings) --
def _answer_spans(embeddings: "dict | None", answer: str = "The refund was issued.") -> "list":
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exp = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exp))
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support",
                  "gen_ai.output.messages": json.dumps([{"role": "assistant",
                                                         "parts": [{"type": "text", "content": answer}]}])}
    attributes.update(embeddings or {})
    with tp.get_tracer("t").start_as_current_span("invoke_agent support", attributes=attributes):
        pass
    return list(exp.get_finished_spans())


REFERENCE = "the refund was issued"
SIMILAR = {"assay.embeddings.response": [0.9, 0.1, 0.0], "assay.embeddings.reference": [1.0, 0.0, 0.0],
           "assay.embeddings.source_reference": REFERENCE}


def _semantic_rules(tmp_path: Path, embedder: str = "") -> Path:
    rules = tmp_path / "rules.yaml"
    settings = f"settings:\n  embedder: {embedder}\n" if embedder else ""
    rules.write_text(f"version: 1\n{settings}tests:\n  - id: similar\n    expected:\n"
                     f"      type: semantic_similarity_to\n      semantic_similarity_to: {REFERENCE}\n"
                     "      min_score: 0.9\n")
    return rules


def test_semantic_similarity_reads_precomputed_embeddings_from_the_span(tmp_path: Path) -> None:
    from spanassert import Trace, check
    from spanassert.config import load_config

    config = load_config(str(_semantic_rules(tmp_path)))  # no embedder: loads, with a warning that says so
    assert [d.code for d in config.diagnostics] == ["W_CFG_EMBEDDINGS_FROM_TRACE"]
    r = check(Trace.from_spans(_answer_spans(SIMILAR)), config)
    assert r.passed and "precomputed embeddings from the trace" in r.items[0].detail  # cos 0.994 >= 0.9
    far = dict(SIMILAR, **{"assay.embeddings.response": [0.0, 1.0, 0.0]})
    r = check(Trace.from_spans(_answer_spans(far)), config)
    assert r.items[0].verdict.value == "failed" and "below min_score" in r.items[0].detail
    # JSON text works as well as an array attribute
    as_text = dict(SIMILAR, **{"assay.embeddings.response": "[0.9, 0.1, 0.0]"})
    assert check(Trace.from_spans(_answer_spans(as_text)), config).passed
    # none recorded, none computable: inconclusive, never passed
    for missing in ({}, {k: v for k, v in SIMILAR.items() if k != "assay.embeddings.source_reference"},
                    dict(SIMILAR, **{"assay.embeddings.source_reference": "another reference"}),
                    dict(SIMILAR, **{"assay.embeddings.response": [0.9, "x", 0.0]}),
                    dict(SIMILAR, **{"assay.embeddings.response": [0.9, 0.1]})):
        r = check(Trace.from_spans(_answer_spans(missing)), config)
        assert r.items[0].verdict.value == "inconclusive", (missing, r.items[0].detail)


def test_semantic_similarity_falls_back_to_the_embedder_only_without_embeddings(tmp_path: Path) -> None:
    import os

    from spanassert import Trace, check
    from spanassert.config import load_config

    # an embedder that counts its calls in a file: it must not run when the span carries the embeddings
    (tmp_path / "countingembed.py").write_text(
        "import os\n"
        f"LOG = {str(tmp_path / 'calls.log')!r}\n"
        "def embed(text):\n"
        "    with open(LOG, 'a') as fh:\n"
        "        fh.write(text + '\\n')\n"
        "    return [float(text.lower().count(c)) for c in 'abcdefghijklmnopqrstuvwxyz']\n")
    sys.path.insert(0, str(tmp_path))
    try:
        config = load_config(str(_semantic_rules(tmp_path, "countingembed:embed")))
        assert not config.diagnostics
        assert check(Trace.from_spans(_answer_spans(SIMILAR)), config).passed
        assert not os.path.exists(tmp_path / "calls.log")
        r = check(Trace.from_spans(_answer_spans({}, answer="The refund was issued!")), config)
        assert r.passed and "settings.embedder" in r.items[0].detail
        assert (tmp_path / "calls.log").read_text().count("\n") == 2  # the reference and the answer
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("countingembed", None)


def test_precomputed_embeddings_survive_an_exported_file(tmp_path: Path) -> None:
    """Through the OTLP file exporter and `spanassert replay`, as a user runs it."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from otlp_file_exporter import FileSpanExporter

    trace = tmp_path / "t.jsonl"
    exporter = FileSpanExporter(str(trace))
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    for span in _answer_spans(SIMILAR):
        exporter.export([span])
    tp.shutdown()
    p = run("replay", "-c", str(_semantic_rules(tmp_path)), str(trace), "--format", "json", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    report = json.loads(p.stdout)
    (result,) = [r for ep in report["episodes"] for r in ep["results"]]
    assert result["verdict"] == "passed" and "precomputed" in result["message"]


# -- json_schema together with schema_file (Assay: the file replaces json_schema) ---------------------
def test_json_schema_with_schema_file_reads_the_file(tmp_path: Path) -> None:
    from spanassert import Trace, check
    from spanassert.config import load_config

    (tmp_path / "answer.schema.json").write_text('{"type": "object", "required": ["refund_id"]}')
    rules = tmp_path / "rules.yaml"
    rules.write_text("version: 1\ntests:\n  - id: t\n    expected:\n      type: json_schema\n"
                     "      json_schema: '{\"type\": \"string\"}'\n      schema_file: answer.schema.json\n")
    config = load_config(str(rules))
    assert [d.code for d in config.diagnostics] == ["W_CFG_NO_EFFECT"]
    assert "`json_schema` is not read when `schema_file` is given" in config.diagnostics[0].message
    ok = check(Trace.from_spans(_answer_spans({}, answer='{"refund_id": "R-1"}')), config)
    assert ok.passed  # the file's schema (an object), not json_schema's (a string)
    bad = check(Trace.from_spans(_answer_spans({}, answer='"R-1"')), config)
    assert bad.items[0].verdict.value == "failed"
    # Assay's placeholder form: an empty json_schema beside the file, no warning
    rules.write_text(rules.read_text().replace("'{\"type\": \"string\"}'", '""'))
    assert not load_config(str(rules)).diagnostics


# -- free-form keys beside a unit-test form's policy (Assay: tests/assertions_unknown_fields.rs) ---------
def test_free_form_policy_keys_in_unit_forms_are_accepted(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("""\
version: 1
tests:
  - id: t
    assertions:
      - type: args_valid
        tool: t
        test_args: {anything: {nested: [1, 2]}, weird_key: true, x: 1}
        policy: {schema: {properties: {x: {type: number}}}, extra_policy_key: 1}
      - type: tool_blocklist
        test_tool_calls: [rm]
        policy: {blocked: [rm], unknown_policy_key: 1}
        expect: fail
      - type: sequence_valid
        test_trace_raw: [{tool: a}]
        policy: {regex: '^a$', note: free}
""")
    p = run("validate", str(rules), cwd=tmp_path)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert out.count("W_CFG_NO_EFFECT") == 3 and "unit-test forms 3 passed / 0 failed" in out
    # a key that is the form's own vocabulary still cannot be mistyped silently: `regx` is not read, and
    # the form without a regex cannot fail, so it is refused
    rules.write_text(rules.read_text().replace("regex: '^a$'", "regx: '^a$'"))
    p = run("validate", str(rules), cwd=tmp_path)
    assert p.returncode == 2 and "E_ASSERT_INEFFECTIVE" in p.stdout + p.stderr


def test_top_level_definitions_holds_yaml_anchors(tmp_path: Path) -> None:
    # Assay's strict load exempts `definitions` (with `x-*` and `_*`) from its unknown-key check
    rules = tmp_path / "rules.yaml"
    rules.write_text("version: 1\ndefinitions:\n  forbidden: &forbidden delete_database\n"
                     "tests:\n  - id: t\n    assertions:\n      - {type: trace_must_not_call_tool, tool: *forbidden}\n")
    p = run("validate", str(rules), cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
