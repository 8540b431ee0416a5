"""Arguments that are not an object (issue 12, situation 4), end to end through the public surface.

Some instrumentations record a one-parameter tool's input as the bare value: OpenInference's
LangChain instrumentation writes `input.value = "prod"`, not `{"name": "prod"}`, and sets every
attribute at span end. A rule on a named argument must never pass on such a call: where the tool's
definition was recorded (on the model step that chose the tool, or on the tool span) the value is
bound to the tool's one parameter; otherwise the rule is inconclusive for that call, with the reason.

The same spans go through the live processor (real SDK, the model step ending before the tool span
starts), `spanassert replay` on the file the SDK wrote, and `check()`: the verdicts are the same.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otlp_file_exporter import FileSpanExporter

from spanassert import AssertionSpanProcessor, Trace, Undecidable, check
from spanassert.config import load_config
from spanassert.core.results import EpisodeResult

RULES = """\
version: 1
tests:
  - id: no-prod-deploy
    assertions:
      - type: trace_must_not_call_tool
        tool: deploy
        args_match: {env: "^prod$"}
  - id: deploy-args
    assertions:
      - type: trace_args_valid
        tool: deploy
        schema:
          type: object
          properties: {env: {enum: [staging, dev]}}
          required: [env]
  - id: deploy-args-expected
    expected:
      type: args_valid
      schema:
        deploy: {properties: {env: {not: {const: prod}}}, required: [env]}
"""

ONE_PARAM = {"type": "object", "properties": {"env": {"type": "string"}}, "required": ["env"]}
TWO_PARAMS = {"type": "object", "properties": {"env": {"type": "string"}, "region": {"type": "string"}}}


def openai_tool(params: Dict[str, Any]) -> str:
    """A tool as OpenInference records it in `llm.tools.<i>.tool.json_schema` (OpenAI's format)."""
    return json.dumps({"type": "function", "function": {"name": "deploy", "description": "Deploy",
                                                         "parameters": params}})


# name -> how the agent run is recorded:
#   convention: "openinference" (attributes set at span end, bare `input.value`) or "genai"
#   step: tool definitions on the model step that chose the tool (None: none recorded)
#   own: attributes on the tool span that define the tool's parameters
#   value: the recorded arguments, as written
#   verdicts: (no-prod-deploy, deploy-args, deploy-args-expected)
SCENARIOS: Dict[str, Dict[str, Any]] = {
    "bound-by-step-violation": dict(convention="openinference", step={"llm.tools.0.tool.json_schema": openai_tool(ONE_PARAM)},
                                    value="prod", verdicts=("failed", "failed", "failed")),
    "bound-by-step-valid": dict(convention="openinference", step={"llm.tools.0.tool.json_schema": openai_tool(ONE_PARAM)},
                                value="staging", verdicts=("passed", "passed", "passed")),
    "bound-by-own-span": dict(convention="openinference", own={"tool.parameters": json.dumps({"env": "str"})},
                              value="prod", verdicts=("failed", "failed", "failed")),
    "genai-definitions": dict(convention="genai", step={"gen_ai.tool.definitions": json.dumps(
        [{"type": "function", "name": "deploy", "parameters": ONE_PARAM}])},
        value=json.dumps("prod"), verdicts=("failed", "failed", "failed")),
    # Arguments on the tool span at its start (judged then, before the tool body runs), bound by the
    # step's definitions; or by the tool span's own definition, set at its end (judged again then).
    "genai-at-start": dict(convention="genai", at_start=True, step={"gen_ai.tool.definitions": json.dumps(
        [{"type": "function", "name": "deploy", "parameters": ONE_PARAM}])},
        value=json.dumps("prod"), verdicts=("failed", "failed", "failed")),
    "genai-at-start-own-definition-at-end": dict(convention="genai", at_start=True, own={
        "gen_ai.tool.definitions": json.dumps([{"type": "function", "name": "deploy", "parameters": ONE_PARAM}])},
        value=json.dumps("prod"), verdicts=("failed", "failed", "failed")),
    "no-definition": dict(convention="openinference", value="prod",
                          verdicts=("inconclusive", "inconclusive", "inconclusive")),
    "no-definition-array": dict(convention="openinference", value=json.dumps(["prod"]),
                                verdicts=("inconclusive", "inconclusive", "inconclusive")),
    "no-definition-text": dict(convention="genai", value="prod please",
                               verdicts=("inconclusive", "inconclusive", "inconclusive")),
    "two-parameters": dict(convention="openinference", step={"llm.tools.0.tool.json_schema": openai_tool(TWO_PARAMS)},
                           value="prod", verdicts=("inconclusive", "inconclusive", "inconclusive")),
}
TESTS = ("no-prod-deploy", "deploy-args", "deploy-args-expected")


def run_agent(tracer: Any, scenario: Dict[str, Any]) -> str:
    """One agent run: a model step that picks `deploy`, then the `deploy` tool span."""
    oi = scenario["convention"] == "openinference"
    with tracer.start_as_current_span("AgentExecutor" if oi else "invoke_agent ops") as agent:
        trace_id = format(agent.get_span_context().trace_id, "032x")
        # The model step ends before the tool span starts (as in every agent loop).
        with tracer.start_as_current_span("ChatOpenAI" if oi else "chat gpt-4o") as step:
            step.set_attributes({"openinference.span.kind": "LLM"} if oi else {"gen_ai.operation.name": "chat"})
            step.set_attributes(scenario.get("step") or {})
        if oi:
            # OpenInference's LangChain tracer sets every attribute at the end of the run.
            with tracer.start_as_current_span("deploy") as tool:
                tool.set_attributes({"openinference.span.kind": "TOOL", "tool.name": "deploy",
                                     "input.value": scenario["value"]})
                tool.set_attributes(scenario.get("own") or {})
            agent.set_attribute("openinference.span.kind", "AGENT")
        else:
            at_start = {"gen_ai.tool.call.arguments": scenario["value"]} if scenario.get("at_start") else {}
            with tracer.start_as_current_span("execute_tool deploy", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "deploy", **at_start}) as tool:
                if not at_start:
                    tool.set_attribute("gen_ai.tool.call.arguments", scenario["value"])
                tool.set_attributes(scenario.get("own") or {})
            agent.set_attributes({"gen_ai.operation.name": "invoke_agent"})
    return trace_id


def verdicts_of(ep: EpisodeResult) -> Dict[str, str]:
    return {r.test_id: r.verdict.value for r in ep.results}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    """Every scenario run once under the live processor, exported to a file and to memory."""
    tmp = tmp_path_factory.mktemp("binding")
    rules = tmp / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    config = load_config(str(rules))
    traces = tmp / "traces.jsonl"
    live: List[EpisodeResult] = []
    memory = InMemorySpanExporter()
    processor = AssertionSpanProcessor(config, export=SimpleSpanProcessor(FileSpanExporter(str(traces))),
                                       on_episode=live.append, tick_interval=0, background=False)
    provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("binding-test")
    ids = {name: run_agent(tracer, s) for name, s in SCENARIOS.items()}
    provider.shutdown()
    return {"rules": rules, "traces": traces, "ids": ids, "live": {ep.trace_id: ep for ep in live},
            "spans": memory.get_finished_spans()}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_live_processor_binds_a_bare_value_or_is_inconclusive(recorded: Dict[str, Any], name: str) -> None:
    ep = recorded["live"][recorded["ids"][name]]
    assert ep.call_count == 1
    assert verdicts_of(ep) == dict(zip(TESTS, SCENARIOS[name]["verdicts"]))


def test_inconclusive_calls_say_why(recorded: Dict[str, Any]) -> None:
    ep = recorded["live"][recorded["ids"]["no-definition"]]
    messages = {r.test_id: r.message for r in ep.results}
    for test in TESTS:
        assert "recorded as a bare string, not an object of named arguments" in messages[test], messages[test]
        assert "definition (its parameter names) was not recorded" in messages[test]
    two = {r.test_id: r.message for r in recorded["live"][recorded["ids"]["two-parameters"]].results}
    assert "the tool's recorded definition has 2 parameters, not one" in two["no-prod-deploy"]


def test_the_bound_violation_names_the_bound_argument(recorded: Dict[str, Any]) -> None:
    ep = recorded["live"][recorded["ids"]["bound-by-step-violation"]]
    messages = {r.test_id: r.message for r in ep.results}
    assert "with arguments matching env =~ /^prod$/" in messages["no-prod-deploy"]
    assert "env: violates `enum`" in messages["deploy-args"]


def test_replay_of_the_exported_file_gives_the_live_verdicts(recorded: Dict[str, Any]) -> None:
    proc = subprocess.run([sys.executable, "-m", "spanassert.cli", "replay", "--config", str(recorded["rules"]),
                           "--format", "json", str(recorded["traces"])],
                          capture_output=True, text=True, encoding="utf-8", timeout=120)
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    replayed = {e["trace_id"]: {r["test"]: r["verdict"] for r in e["results"]} for e in doc["episodes"]}
    for name, trace_id in recorded["ids"].items():
        assert replayed[trace_id] == verdicts_of(recorded["live"][trace_id]), name
        assert replayed[trace_id] == dict(zip(TESTS, SCENARIOS[name]["verdicts"])), name


def test_check_and_trace_queries_bind_the_same_way(recorded: Dict[str, Any]) -> None:
    spans = recorded["spans"]
    for name, trace_id in recorded["ids"].items():
        mine = Trace.from_spans([s for s in spans if format(s.get_span_context().trace_id, "032x") == trace_id])
        result = check(mine, str(recorded["rules"]))
        assert {i.label: i.verdict.value for i in result.items} == dict(zip(TESTS, SCENARIOS[name]["verdicts"])), name
        expected = SCENARIOS[name]["verdicts"][0]
        if expected == "failed":
            assert mine.called("deploy", env="prod")
        elif expected == "passed":
            assert not mine.called("deploy", env="prod") and mine.called("deploy", env="staging")
        else:
            # An unbound bare value may be the call asked about: neither True nor False.
            with pytest.raises(Undecidable, match="not an object"):
                mine.called("deploy", env="prod")


def test_serve_over_real_otlp_binds_the_same_way(recorded: Dict[str, Any], tmp_path: Path) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult
    from test_serve_receiver import Serve

    spans = recorded["spans"]
    serve = Serve(tmp_path, "--settle", "0.3", rules=RULES)
    try:
        exporter = OTLPSpanExporter(endpoint=serve.url + "/v1/traces")
        assert exporter.export(spans) is SpanExportResult.SUCCESS
        exporter.shutdown()
        serve.wait_for(lambda: serve.health()["spans_received"] == len(spans))
        code, _, report = serve.stop()
    finally:
        serve.kill()
    assert code == 0, serve.stderr()
    served = {e["trace_id"]: {r["test"]: r["verdict"] for r in e["results"]} for e in report["episodes"]}
    for name, trace_id in recorded["ids"].items():
        assert served[trace_id] == dict(zip(TESTS, SCENARIOS[name]["verdicts"])), name


def test_tool_definitions_are_read_in_every_recorded_shape_and_hostile_ones_are_ignored() -> None:
    from spanassert.mapping import Mapper

    m = Mapper()
    params = {"type": "object", "properties": {"env": {"type": "string"}}}
    shapes = {
        "otel": [{"type": "function", "name": "deploy", "parameters": params}],
        "openai": [{"type": "function", "function": {"name": "deploy", "parameters": params}}],
        "anthropic": [{"name": "deploy", "input_schema": params}],
        "mcp": [{"name": "deploy", "inputSchema": params}],
    }
    for label, defs in shapes.items():
        assert m.tool_definitions({"gen_ai.tool.definitions": json.dumps(defs)}) == {"deploy": ("env",)}, label
        # A list of JSON strings, as some SDKs record structured values.
        assert m.tool_definitions({"gen_ai.tool.definitions": [json.dumps(d) for d in defs]}) == {"deploy": ("env",)}
    flattened = {"openinference.span.kind": "LLM", "llm.tools.0.tool.json_schema": openai_tool(TWO_PARAMS),
                 "llm.tools.1.tool.json_schema": json.dumps({"type": "function", "function": {
                     "name": "status", "parameters": {"type": "object"}}})}
    assert m.tool_definitions(flattened) == {"deploy": ("env", "region"), "status": ()}
    # On the tool span itself.
    assert m.declared_parameters("deploy", {"tool.parameters": json.dumps({"env": "str"})}) == ("env",)
    assert m.declared_parameters("deploy", {"tool.parameters": json.dumps(params)}) == ("env",)
    assert m.declared_parameters("deploy", {"tool.json_schema": openai_tool(ONE_PARAM)}) == ("env",)
    assert m.declared_parameters("deploy", {}) is None
    # Hostile or odd values: no definition, never an exception.
    for junk in ("not json", "[1, 2, {]", json.dumps([{"name": 5}]), json.dumps({"name": "x"}), "x" * 300_000,
                 json.dumps([[[[]]]]), json.dumps([{"name": "deploy", "parameters": "nope"}])):
        assert m.tool_definitions({"gen_ai.tool.definitions": junk}) is None, junk[:40]
        if junk != json.dumps({"name": "x"}):  # that one is a fine `tool.parameters`: one parameter, `name`
            assert m.declared_parameters("deploy", {"tool.parameters": junk, "tool.json_schema": junk}) is None


def test_background_evaluation_binds_the_same_way(recorded: Dict[str, Any]) -> None:
    # The default with an export: the engine runs on the processor's worker thread.
    live: List[EpisodeResult] = []
    processor = AssertionSpanProcessor(load_config(str(recorded["rules"])), on_episode=live.append,
                                       export=SimpleSpanProcessor(InMemorySpanExporter()), background=True)
    provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("binding-test")
    ids = {name: run_agent(tracer, s) for name, s in SCENARIOS.items()}
    provider.shutdown()
    by_trace = {ep.trace_id: verdicts_of(ep) for ep in live}
    for name, trace_id in ids.items():
        assert by_trace[trace_id] == dict(zip(TESTS, SCENARIOS[name]["verdicts"])), name
