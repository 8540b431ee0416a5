"""`expected:` checks and unit-test forms end to end: a YAML rules file through the real loader,
spans from the real OpenTelemetry SDK through the live processor."""
from __future__ import annotations

import json
from typing import Any, List

from livekit import Rig, finish_tool, genai_tool

from spanassert.config import load_config
from spanassert.core.model import ConfigError

RULES = """\
version: 1
suite: expected-live
model: trace
tests:
  - id: no-egress-after-credentials
    input: {prompt: "tidy up"}
    expected:
      type: sequence_valid
      rules:
        - type: never_after
          trigger: read_credentials
          forbidden: http_post
  - id: answer-names-the-city
    input: {prompt: "weather?"}
    expected:
      type: must_contain
      must_contain: ["Tokyo"]
  - id: discount-policy
    input: {prompt: "-"}
    assertions:
      - {type: args_valid, tool: apply_discount, policy: {schema: {properties: {percent: {type: number, maximum: 30}}, required: [percent]}}, test_args: {percent: 10}, expect: pass}
      - {type: args_valid, tool: apply_discount, policy: {schema: {properties: {percent: {type: number, maximum: 30}}, required: [percent]}}, test_args: {percent: 15}, expect: pass}
      - {type: args_valid, tool: apply_discount, policy: {schema: {properties: {percent: {type: number, maximum: 30}}, required: [percent]}}, test_args: {percent: 25}, expect: pass}
      - {type: args_valid, tool: apply_discount, policy: {schema: {properties: {percent: {type: number, maximum: 30}}, required: [percent]}}, test_args: {percent: 0}, expect: pass}
      - {type: args_valid, tool: apply_discount, policy: {schema: {properties: {percent: {type: number, maximum: 30}}, required: [percent]}}, test_args: {percent: 50}, expect: fail}
"""


def _answer(text: str) -> str:
    return json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": text}]}])


def test_unit_forms_are_evaluated_at_load_and_the_fp_suite_passes():
    config = load_config(RULES)
    assert config.unit_failures == []
    outcomes = [o.verdict.value for t in config.tests for _, o in t.unit_results]
    assert outcomes == ["passed"] * 5


def test_credential_read_then_egress_is_reported_while_the_egress_span_is_open():
    violations: List[Any] = []
    episodes: List[Any] = []
    rig = Rig(load_config(RULES), on_violation=violations.append, on_episode=episodes.append)
    t = rig.tracer
    with t.start_as_current_span("invoke_agent ops", attributes={"gen_ai.operation.name": "invoke_agent"}) as root:
        for name in ("list_dir", "read_credentials"):
            finish_tool(genai_tool(t, name))
        egress = genai_tool(t, "http_post")
        seen_while_open = [v.message for v in violations]
        finish_tool(egress)
        root.set_attribute("gen_ai.output.messages", _answer("Done. It is sunny in Tokyo."))
    assert seen_while_open == [
        "sequence_valid rule failed: tool 'http_post' at call #3 is forbidden after 'read_credentials' "
        "(triggered at call #2)"
    ]
    assert violations[0].span_id == format(egress.get_span_context().span_id, "016x")
    verdicts = {r.test_id: r.verdict.value for e in episodes for r in e.results}
    assert verdicts == {"no-egress-after-credentials": "failed", "answer-names-the-city": "passed"}


def test_final_output_check_fails_on_the_recorded_answer_and_is_inconclusive_without_one():
    episodes: List[Any] = []
    rig = Rig(load_config(RULES), on_episode=episodes.append)
    t = rig.tracer
    with t.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}) as root:
        root.set_attribute("gen_ai.output.messages", _answer("It is sunny in Osaka."))
    with t.start_as_current_span("invoke_agent b", attributes={"gen_ai.operation.name": "invoke_agent"}):
        pass
    city = [r for e in episodes for r in e.results if r.test_id == "answer-names-the-city"]
    assert [r.verdict.value for r in city] == ["failed", "inconclusive"]
    assert city[0].message == "final output does not contain 'Tokyo'"


def test_an_empty_must_contain_is_refused_by_the_loader_at_its_position():
    text = RULES.replace('must_contain: ["Tokyo"]', "must_contain: []")
    try:
        load_config(text)
    except ConfigError as exc:
        (d,) = [d for d in exc.diagnostics if d.code == "E_CFG_VACUOUS"]
        assert "would pass for any response" in d.message
        line = next(i for i, l in enumerate(text.splitlines(), 1) if "must_contain: []" in l)
        assert d.line == line and d.path.endswith("expected.must_contain")
    else:
        raise AssertionError("an empty must_contain was accepted")


def test_semantic_similarity_reads_embeddings_set_on_the_live_agent_span():
    """Issue 19: the precomputed embeddings are read the way the final output is, when the agent span
    ends in the live processor (set during the run, as an instrumentation would)."""
    rules = ("version: 1\ntests:\n  - id: close\n    expected:\n      type: semantic_similarity_to\n"
             "      semantic_similarity_to: refund issued\n      min_score: 0.9\n")
    episodes: List[Any] = []
    rig = Rig(load_config(rules), on_episode=episodes.append)
    t = rig.tracer
    for response in ([1.0, 0.05], [0.0, 1.0]):
        with t.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}) as root:
            finish_tool(genai_tool(t, "issue_refund"))
            root.set_attribute("gen_ai.output.messages", _answer("The refund is issued."))
            root.set_attribute("assay.embeddings.response", response)
            root.set_attribute("assay.embeddings.reference", [1.0, 0.0])
            root.set_attribute("assay.embeddings.source_reference", "refund issued")
    with t.start_as_current_span("invoke_agent b", attributes={"gen_ai.operation.name": "invoke_agent"}) as root:
        root.set_attribute("gen_ai.output.messages", _answer("The refund is issued."))  # no embeddings
    verdicts = [r.verdict.value for e in episodes for r in e.results if r.test_id == "close"]
    assert verdicts == ["passed", "failed", "inconclusive"]
