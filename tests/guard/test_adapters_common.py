"""What the framework adapters share, in the test venv (no framework installed): importing an adapter
needs no framework, using one without it names the extra, and a call decided inside the adapter's own
tool span is recorded once — with or without an agent span around it — and replays the same."""
from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, List

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otlp_file_exporter import FileSpanExporter
from spanassert import AssertionSpanProcessor
from spanassert.live.guard_adapters._common import decided_call

RULES = """\
version: 1
tests:
  - id: no-db-delete
    action: block
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
"""

# adapter module, its entry point, the framework's top-level module (hidden here), the extra
ADAPTERS = [("langchain", "guard_middleware", "langchain", "langchain"),
            ("openai_agents", "guard_tools", "agents", "openai-agents"),
            ("pydantic_ai", "guard_capability", "pydantic_ai", "pydantic-ai")]


@pytest.mark.parametrize("module,entry,framework,extra", ADAPTERS)
def test_adapter_imports_without_its_framework_and_names_the_extra_when_used(module: str, entry: str, framework: str,
                                                                              extra: str) -> None:
    code = (f"import sys; sys.modules[{framework!r}] = None  # as if not installed\n"
            f"from spanassert.live.guard_adapters import {module} as m\n"
            "from spanassert import AssertionSpanProcessor\n"
            "import tempfile, os\n"
            f"p = os.path.join(tempfile.mkdtemp(), 'r.yaml'); open(p, 'w').write({RULES!r})\n"
            "g = AssertionSpanProcessor(p).guard()\n"
            f"args = ([], g) if '{entry}' == 'guard_tools' else (g,)\n"
            f"try:\n    m.{entry}(*args)\nexcept ImportError as e:\n    print(e)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f"pip install 'spanassert[{extra}]'" in proc.stdout, proc.stdout
    assert importlib.import_module(f"spanassert.live.guard_adapters.{module}")


def _run(tmp_path: Path, with_agent_span: bool) -> Any:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    out = tmp_path / "spans.jsonl"
    live: List[Any] = []
    processor = AssertionSpanProcessor(str(rules), export=SimpleSpanProcessor(FileSpanExporter(str(out))),
                                       on_episode=live.append, background=False, tick_interval=0)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    guard = processor.guard(tracer_provider=provider)
    ran: List[str] = []

    def calls() -> None:
        for name, args in (("lookup", {"q": "a"}), ("delete_database", {"name": "prod"})):
            with decided_call(guard, name, args, f"id-{name}") as (decision, _span):
                if decision.allowed:
                    ran.append(name)

    if with_agent_span:
        with provider.get_tracer("app").start_as_current_span(
                "invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
            calls()
    else:
        calls()
    provider.shutdown()
    return rules, out, live, ran


@pytest.mark.parametrize("with_agent_span", [True, False], ids=["in-agent-span", "no-trace-context"])
def test_a_call_decided_in_its_own_span_is_recorded_once_and_replays_the_same(tmp_path: Path,
                                                                              with_agent_span: bool) -> None:
    rules, out, live, ran = _run(tmp_path, with_agent_span)
    assert ran == ["lookup"]
    failed = [(ep.key, r.test_id) for ep in live for r in ep.results if r.verdict.value == "failed"]
    assert len(failed) == 1, failed  # one episode fails the rule: the call is not counted twice
    spans = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    tool_spans = [s for doc in spans for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]
                  if s["name"] == "execute_tool delete_database"]
    assert len(tool_spans) == 1
    attrs = {a["key"]: a["value"].get("stringValue") for a in tool_spans[0]["attributes"]}
    assert attrs["spanassert.guard.decision"] == "blocked"
    assert attrs["gen_ai.tool.call.result"].startswith("spanassert blocked the call of `delete_database`")
    labels = [a["value"]["stringValue"] for e in tool_spans[0].get("events", []) for a in e["attributes"]
              if a["key"] == "gen_ai.evaluation.score.label"]
    assert labels == ["blocked"]
    proc = subprocess.run([sys.executable, "-m", "spanassert.cli", "replay", "--config", str(rules), "--format", "json",
                           str(out)], capture_output=True, text=True, timeout=120)
    doc = json.loads(proc.stdout)
    replayed = {e["key"]: sorted([r["test"], r["index"], r["verdict"], r["span_id"] or ""] for r in e["results"])
                for e in doc["episodes"]}
    assert replayed == {ep.key: [list(t) for t in ep.verdict_signature()] for ep in live}
    assert proc.returncode == 1
