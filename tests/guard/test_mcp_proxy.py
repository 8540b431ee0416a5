"""`spanassert mcp-proxy` (issue 17, adapter 6): a real MCP client (the `mcp` package's stdio client)
talks through the proxy (a subprocess, the real CLI) to a real MCP server (`mcp_tools_server.py`,
the package's MCPServer). Blocked calls never reach the server (its tool bodies leave marker files),
the client gets MCP's refused-call result, allowed calls pass, and the spans the proxy exported
replay (`spanassert replay`, a subprocess) to the verdicts the proxy gave live."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

pytest.importorskip("mcp", reason="the mcp extra (Python 3.10+): pip install 'spanassert[mcp]'")

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parent.parent.parent
SERVER = Path(__file__).resolve().parent / "mcp_tools_server.py"

RULES = """\
version: 1
tests:
  - id: never-drop-databases
    action: block
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
  - id: refunds-capped
    action: block
    assertions:
      - type: trace_args_valid
        tool: issue_refund
        schema:
          type: object
          properties:
            amount: { type: number, maximum: 100 }
          required: [amount]
"""


def proxy_env(markers: Path) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env["SPANASSERT_TEST_MARKER_DIR"] = str(markers)
    return env


def proxy_params(rules: Path, export: Path, markers: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "spanassert", "mcp-proxy", "--config", str(rules), "--export", str(export), *extra,
              "--", sys.executable, str(SERVER)],
        env=proxy_env(markers), cwd=str(ROOT))


def call_through_proxy(params: StdioServerParameters, calls: List[Tuple[str, Dict[str, Any]]],
                       errlog: Path, mode: str = "auto") -> List[Any]:
    """Each call's result, through the proxy; its stderr (refusals, live verdicts) into ``errlog``.
    ``mode``: the client's protocol negotiation ("auto": 2026-07-28 when the server has it,
    "legacy": the initialize handshake)."""

    async def session() -> List[Any]:
        results = []
        with open(errlog, "w", encoding="utf-8") as err:
            async with Client(stdio_client(params, errlog=err), read_timeout_seconds=60, mode=mode) as client:
                listed = await client.list_tools()
                assert {t.name for t in listed.tools} >= {"lookup_order", "issue_refund", "delete_database"}
                for name, arguments in calls:
                    results.append(await client.call_tool(name, arguments))
        return results

    return anyio.run(session)


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def replay_json(rules: Path, export: Path) -> Tuple[int, Dict[str, Any]]:
    proc = subprocess.run([sys.executable, "-m", "spanassert", "replay", "--config", str(rules), "--format", "json",
                           str(export)], capture_output=True, text=True, timeout=120, cwd=str(ROOT),
                          env=proxy_env(export.parent))
    return proc.returncode, json.loads(proc.stdout)


def live_verdicts(errlog: Path) -> Dict[str, Dict[str, str]]:
    """The proxy's stderr lines `episode KEY: VERDICT; test: verdict, ...`, by episode key."""
    out: Dict[str, Dict[str, str]] = {}
    for line in errlog.read_text(encoding="utf-8").splitlines():
        if not line.startswith("spanassert mcp-proxy: episode "):
            continue
        head, _, tests = line[len("spanassert mcp-proxy: episode "):].partition("; ")
        key = head.split(":")[0]
        out[key] = dict(t.split(": ") for t in tests.split(", ") if ": " in t)
    return out


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_proxy_refuses_blocked_calls_before_the_server_runs_them(tmp_path: Path, mode: str) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    export = tmp_path / "spans.jsonl"
    markers = tmp_path / "markers"
    markers.mkdir()
    errlog = tmp_path / "proxy.err"
    results = call_through_proxy(proxy_params(rules, export, markers), [
        ("lookup_order", {"order_id": "A1"}),
        ("delete_database", {"name": "prod"}),
        ("issue_refund", {"order_id": "A1", "amount": 500}),
        ("issue_refund", {"order_id": "A1", "amount": 20}),
    ], errlog, mode)
    stderr = errlog.read_text(encoding="utf-8")

    looked_up, dropped, big_refund, small_refund = results
    assert not looked_up.is_error and text_of(looked_up) == "order A1: shipped"
    # Refused: MCP's tool-error result naming the rule, and the server never ran the body.
    assert dropped.is_error and "never-drop-databases" in text_of(dropped), text_of(dropped)
    assert "delete_database" in text_of(dropped)
    assert not (markers / "delete_database.ran").exists(), stderr
    assert big_refund.is_error and "refunds-capped" in text_of(big_refund), text_of(big_refund)
    assert not small_refund.is_error and text_of(small_refund) == "refunded 20.0 on A1"
    ran = [json.loads(line) for line in (markers / "issue_refund.ran").read_text().splitlines()]
    assert ran == [{"amount": 20.0, "order_id": "A1"}]  # the capped call never ran
    assert "refused tools/call 'delete_database'" in stderr and "refused tools/call 'issue_refund'" in stderr

    # The exported spans: one execute_tool span per call, the refused ones carrying the decision event.
    from spanassert.otlp import read_spans

    spans = list(read_spans(str(export)))
    tools = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    assert sorted(s.attributes["gen_ai.tool.name"] for s in tools) == [
        "delete_database", "issue_refund", "issue_refund", "lookup_order"]
    blocked = [s for s in tools if any(e.name == "gen_ai.evaluation.result" for e in s.events)]
    assert sorted(s.attributes["gen_ai.tool.name"] for s in blocked) == ["delete_database", "issue_refund"]
    assert len({s.trace_id for s in spans}) == 1  # one session, one episode

    # Replay of the exported file: the verdicts the proxy reported live.
    live = live_verdicts(errlog)
    both_failed = {"never-drop-databases": "failed", "refunds-capped": "failed"}
    assert live and all(v == both_failed for v in live.values()), stderr
    code, doc = replay_json(rules, export)
    replayed = {e["key"]: {r["test"]: r["verdict"] for r in e["results"]} for e in doc["episodes"]}
    assert replayed == live
    assert code == 1


def test_proxy_forwards_everything_when_no_rule_blocks(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    export = tmp_path / "spans.jsonl"
    markers = tmp_path / "markers"
    markers.mkdir()
    errlog = tmp_path / "proxy.err"
    results = call_through_proxy(proxy_params(rules, export, markers), [
        ("lookup_order", {"order_id": "B2"}),
        ("issue_refund", {"order_id": "B2", "amount": 100}),
        ("nonexistent_tool", {}),
    ], errlog)
    assert [r.is_error for r in results] == [False, False, True]  # the server's own error, passed on
    assert "refused" not in errlog.read_text(encoding="utf-8")
    assert (markers / "lookup_order.ran").exists() and (markers / "issue_refund.ran").exists()
    code, doc = replay_json(rules, export)
    assert code == 0, doc
    assert {r["verdict"] for e in doc["episodes"] for r in e["results"]} <= {"passed", "not_applicable"}


def test_proxy_without_a_server_command_says_how_to_give_one() -> None:
    proc = subprocess.run([sys.executable, "-m", "spanassert", "mcp-proxy"], capture_output=True, text=True,
                          timeout=60, cwd=str(ROOT), env=proxy_env(ROOT))
    assert proc.returncode == 2
    assert "give the MCP server's command line after `--`" in proc.stderr


def test_proxy_refuses_to_start_on_an_invalid_rules_file(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("version: 1\ntests:\n  - id: x\n    action: blok\n    assertions: []\n", encoding="utf-8")
    markers = tmp_path / "m"
    markers.mkdir()
    proc = subprocess.run([sys.executable, "-m", "spanassert", "mcp-proxy", "--config", str(rules), "--",
                           sys.executable, str(SERVER)], capture_output=True, text=True, timeout=60, cwd=str(ROOT),
                          env=proxy_env(markers), stdin=subprocess.DEVNULL)
    assert proc.returncode == 2, proc.stderr
    assert "invalid rules file" in proc.stderr and "not started" in proc.stderr


def test_a_call_carrying_its_clients_trace_context_joins_that_trace(tmp_path: Path) -> None:
    # The mcp client stamps the current span's W3C context into params._meta; the proxy's span for
    # the call joins that trace (the episode is the client's agent run), and the guard still decides.
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    export = tmp_path / "spans.jsonl"
    markers = tmp_path / "markers"
    markers.mkdir()
    errlog = tmp_path / "proxy.err"
    agent_span = TracerProvider().get_tracer("agent").start_span("invoke_agent support")
    with trace.use_span(agent_span, end_on_exit=True):
        results = call_through_proxy(proxy_params(rules, export, markers), [
            ("delete_database", {"name": "prod"}), ("lookup_order", {"order_id": "C3"})], errlog)
    assert results[0].is_error and "never-drop-databases" in text_of(results[0])
    assert not results[1].is_error and not (markers / "delete_database.ran").exists()

    from spanassert.otlp import read_spans

    tools = [s for s in read_spans(str(export)) if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    client_trace = format(agent_span.get_span_context().trace_id, "032x")
    assert [s.trace_id for s in tools] == [client_trace, client_trace]
    assert {s.parent_span_id for s in tools} == {format(agent_span.get_span_context().span_id, "016x")}
    # The client's root is not in the proxy's process: live, as replay of the proxy's file, calls
    # the episode incomplete ("root not seen"); the forbidden call still fails it, and every rule
    # has the verdict replay gives it (liveness rules `inconclusive`).
    live = live_verdicts(errlog)
    code, doc = replay_json(rules, export)
    replayed = {e["key"]: {r["test"]: r["verdict"] for r in e["results"]} for e in doc["episodes"]}
    assert replayed[client_trace]["never-drop-databases"] == "failed" == live[client_trace]["never-drop-databases"]
    assert live[client_trace] == replayed[client_trace]
    assert "root not seen" in json.dumps(doc["episodes"])
    assert code == 1


def test_the_proxy_stops_when_the_server_exits_while_the_client_stays(tmp_path: Path) -> None:
    # The client keeps stdin open; the server exits at once. The proxy must not hang on the client.
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    proxy = subprocess.Popen([sys.executable, "-m", "spanassert", "mcp-proxy", "--config", str(rules), "--export",
                              str(tmp_path / "spans.jsonl"), "--", sys.executable, "-c", "pass"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(ROOT),
                             env=proxy_env(tmp_path))
    try:
        code = proxy.wait(timeout=60)  # stdin stays open: no communicate()
        err = proxy.stderr.read().decode() if proxy.stderr else ""
    finally:
        if proxy.poll() is None:
            proxy.kill()
        if proxy.stdin:
            proxy.stdin.close()
    assert code == 1, err
    assert "closed its output; stopping" in err


def test_a_call_retried_after_input_required_is_one_call_decided_once(tmp_path: Path) -> None:
    # MCP 2026-07-28 (SEP-2322): a server may answer tools/call with `input_required`; the client
    # retries the same call (new id, same name and arguments, plus inputResponses/requestState).
    # The retry continues the decided call: "at most one refund" must not refuse it, while a real
    # second call is refused. (The gate with the real guard, processor and SDK, fed the messages.)
    from spanassert import load_config
    from spanassert.live.guard_adapters.mcp_proxy import ProxyTelemetry
    from spanassert.otlp import read_spans
    from spanassert.otlp.writers import JsonLinesSpanExporter

    rules = ("version: 1\ntests:\n  - id: one-refund\n    action: block\n    assertions:\n"
             "      - {type: trace_max_tool_calls, tool: issue_refund, max: 1}\n")
    export = tmp_path / "spans.jsonl"
    telemetry = ProxyTelemetry(load_config(rules), [JsonLinesSpanExporter(str(export))], server="shop")
    gate = telemetry.gate
    call = {"name": "issue_refund", "arguments": {"order_id": "A1", "amount": 20}}
    assert gate.client_request(1, "tools/call", dict(call)) is None
    gate.server_result(1, {"resultType": "input_required", "requestState": "s1",
                           "inputRequests": {"confirm": {"method": "elicitation/create", "params": {}}}})
    retry = dict(call, inputResponses={"confirm": {"action": "accept", "content": {}}}, requestState="s1")
    assert gate.client_request(2, "tools/call", retry) is None  # the same call goes on
    gate.server_result(2, {"content": [{"type": "text", "text": "refunded"}], "isError": False})
    second = gate.client_request(3, "tools/call", dict(call))
    assert second is not None and second["isError"] and "one-refund" in second["content"][0]["text"]
    telemetry.shutdown()
    refunds = [s for s in read_spans(str(export)) if s.attributes.get("gen_ai.tool.name") == "issue_refund"]
    assert len(refunds) == 2
    answered = next(s for s in refunds if "gen_ai.tool.call.result" in s.attributes)
    assert [e.name for e in answered.events if e.name.startswith("mcp.")] == ["mcp.input_required.retry"]


def test_a_shadow_blocking_rule_refuses_nothing_and_says_what_it_would_have_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from spanassert import load_config
    from spanassert.live.guard_adapters.mcp_proxy import ProxyTelemetry
    from spanassert.otlp.writers import JsonLinesSpanExporter

    rules = ("version: 1\ntests:\n  - id: never-drop-databases\n    action: block\n    mode: shadow\n"
             "    assertions:\n      - {type: trace_must_not_call_tool, tool: delete_database}\n")
    telemetry = ProxyTelemetry(load_config(rules), [JsonLinesSpanExporter(str(tmp_path / "s.jsonl"))], server="db")
    assert telemetry.gate.client_request(7, "tools/call", {"name": "delete_database", "arguments": {}}) is None
    telemetry.gate.server_result(7, {"content": [], "isError": False})
    telemetry.shutdown()
    err = capsys.readouterr().err
    assert "shadow: would refuse tools/call 'delete_database' (request 7)" in err and "never-drop-databases" in err
    assert "refused tools/call" not in err
