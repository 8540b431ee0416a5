"""The README's reference examples of the newer rule types, run: each example is loaded from the
README, judged live (the processor in the real SDK) and replayed (the exported file) on an episode
it must pass and one it must fail at a named call; a `match` that does not select the episode makes
it `not_applicable`."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pytest
import yaml
from otlp_file_exporter import FileSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from test_readme import YAML_BLOCKS, rules_text

from spanassert import AssertionSpanProcessor
from spanassert.config import load_config
from spanassert.core.model import Verdict
from spanassert.replay import replay

# (tool, arguments, result); None leaves the attribute unset.
Step = Tuple[str, Optional[Any], Optional[Any]]

EMAIL = "jane.customer@example.org"

# type -> (an episode the README example passes, one it fails, the 0-based call it fails at)
CASES: Dict[str, Tuple[List[Step], List[Step], int]] = {
    "trace_only_tools": (
        [("search_flights", {"to": "LIS"}, None), ("mcp_fs_read_file", {"p": "a"}, None), ("book_flight", {}, None)],
        [("search_flights", {"to": "LIS"}, None), ("mcp_fs_write_file", {"p": "a"}, None)],
        1,
    ),
    "trace_no_repeat": (
        [("search", {"q": "a"}, None), ("search", {"q": "a"}, None), ("search", {"q": "b"}, None)],
        [("search", {"q": "a"}, None), ("fetch", {"u": 1}, None), ("search", {"q": "a"}, None),
         ("search", {"q": "a"}, None)],
        3,
    ),
    "trace_no_flow": (
        [("lookup_customer", {"id": 7}, {"email": EMAIL, "name": "Jane Customer"}),
         ("send_email", {"to": EMAIL, "body": "Dear Jane Customer"}, None)],
        [("lookup_customer", {"id": 7}, {"email": EMAIL}), ("send_email", {"to": "ops", "body": f"see {EMAIL}"}, None)],
        1,
    ),
    "trace_max_tokens": (
        [("@gpt-4o", {"gen_ai.usage.input_tokens": 150000, "gen_ai.usage.output_tokens": 1000}, None),
         ("search", {"q": 1}, None)],
        [("@gpt-4o", {"gen_ai.usage.input_tokens": 150000, "gen_ai.usage.output_tokens": 1000}, None),
         ("@gpt-4o", {"gen_ai.usage.input_tokens": 50000, "gen_ai.usage.output_tokens": 1000}, None)],
        1,
    ),
    "trace_max_cost": (
        [("@gpt-4o", {"gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 1000}, None)],
        [("@gpt-4o", {"gen_ai.usage.input_tokens": 100000, "gen_ai.usage.output_tokens": 10000}, None),
         ("@gpt-4o", {"gen_ai.usage.input_tokens": 100000, "gen_ai.usage.output_tokens": 10000}, None)],
        1,
    ),
    "trace_final_tool": (
        [("verify_answer", {}, None), ("send_reply", {"text": "hi"}, None)],
        [("send_reply", {"text": "hi"}, None), ("verify_answer", {}, None)],
        1,
    ),
    "trace_no_sensitive_data": (
        [("pay", {"card": "4111 1111 1111 1112"}, {"ok": True}), ("send_email", {"body": "thanks"}, "sent")],
        [("pay", {"card": "ok"}, {"ok": True}), ("pay", {"card": "4111 1111 1111 1111"}, {"ok": True})],
        1,
    ),
}


def write(path: str, steps: Sequence[Step], processor: Any, agent: str = "ops") -> Tuple[List[str], str]:
    provider = TracerProvider(resource=Resource.create({"service.name": "agent-under-test"}))
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("reference")
    ids: List[str] = []
    with tracer.start_as_current_span(f"invoke_agent {agent}", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}) as root:
        for tool, args, result in steps:
            if tool.startswith("@"):  # a model step: `args` are the attributes its span records
                with tracer.start_as_current_span(f"chat {tool[1:]}", attributes={
                        "gen_ai.operation.name": "chat", "gen_ai.request.model": tool[1:], **args}) as span:
                    ids.append(format(span.get_span_context().span_id, "016x"))
                continue
            with tracer.start_as_current_span(f"execute_tool {tool}", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}) as span:
                if args is not None:
                    span.set_attribute("gen_ai.tool.call.arguments", json.dumps(args))
                if result is not None:
                    span.set_attribute("gen_ai.tool.call.result", json.dumps(result))
                ids.append(format(span.get_span_context().span_id, "016x"))
        root_id = format(root.get_span_context().span_id, "016x")
    provider.shutdown()
    return ids, root_id


def judge(config: Any, steps: Sequence[Step], tmp: Path, agent: str = "ops") -> Tuple[Any, Any, List[str]]:
    path = str(tmp / f"t{len(os.listdir(tmp))}.jsonl")
    live: List[Any] = []
    proc = AssertionSpanProcessor(config, export=SimpleSpanProcessor(FileSpanExporter(path)),
                                  on_episode=live.append, tick_interval=0, background=False)
    ids, _ = write(path, steps, proc, agent)
    report = replay(config, [path])
    assert not report.input_errors
    assert len(live) == len(report.episodes) == 1
    assert live[0].verdict_signature() == report.episodes[0].verdict_signature()
    return live[0], report, ids


def examples() -> List[Tuple[str, Any]]:
    out = []
    for block in YAML_BLOCKS:
        doc = yaml.safe_load(rules_text(block))
        for test in doc.get("tests") or []:
            for a in test.get("assertions") or []:
                if isinstance(a, dict) and a.get("type") in CASES:
                    out.append((a["type"], block))
    return out


EXAMPLES = examples()


def test_every_new_type_has_a_reference_example() -> None:
    assert {t for t, _ in EXAMPLES} == set(CASES)


@pytest.mark.parametrize("type_name, block", EXAMPLES, ids=[f"{t}@{b.where}" for t, b in EXAMPLES])
def test_reference_example_passes_fails_at_the_named_call_and_can_be_not_applicable(
        type_name: str, block: Any, tmp_path: Path) -> None:
    config = load_config(rules_text(block))
    good, bad, at = CASES[type_name]
    wanted = [r for r in range(len(config.tests[0].trace_assertions))
              if config.tests[0].trace_assertions[r].type_name == type_name]

    episode, _, _ = judge(config, good, tmp_path)
    for i in wanted:
        assert episode.results[i].verdict is Verdict.PASSED, episode.results[i].message

    episode, report, ids = judge(config, bad, tmp_path)
    for i in wanted:
        assert episode.results[i].verdict is Verdict.FAILED
    mine = [v for v in report.violations if v.assertion_type == type_name]
    assert mine and mine[0].span_id == ids[at]
    if not bad[at][0].startswith("@") and mine[0].call_index is not None:  # None: decided at close
        assert mine[0].call_index == at

    doc = yaml.safe_load(rules_text(block))
    doc["tests"][0]["match"] = {"agent": "someone-else"}
    config = load_config(yaml.safe_dump(doc))
    episode, _, _ = judge(config, bad, tmp_path)
    assert {r.verdict for r in episode.results} == {Verdict.NOT_APPLICABLE}
