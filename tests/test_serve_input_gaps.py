"""serve, never a false green on input it could not read (review10). What replay calls "parts of
the input that could not be read" leaves no `passed` in replay's report; serve's --report-json
said `passed` for the same spans:

- a span serve rejected (partial success: a status string OTLP does not define, a span id that is
  not hex, a time that is not a number, ...) is never sent again by the client, and it may be the
  forbidden call: `trace_must_not_call_tool` passed;
- a request refused as unreadable (HTTP 400: a body that is not OTLP) lost all its spans;
- a trace whose spans lost attributes to the SDK's span limits and in which no span is recognised
  (every GenAI marker evicted) opened no episode (replay: fd8e508).

Now serve's report says what replay's does: every `passed` is `inconclusive`, saying why."""
from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from test_dropped_no_episode import _spans  # noqa: E402
from test_serve_receiver import json_request, json_span, post, tool_attrs  # noqa: E402

from spanassert.config import load_config  # noqa: E402
from spanassert.otlp.writers import write_jsonl  # noqa: E402
from spanassert.replay import replay  # noqa: E402
from spanassert.serve import Receiver, ServeOptions  # noqa: E402

RULES = """
version: 1
tests:
  - id: no-delete
    assertions: [{type: trace_must_not_call_tool, tool: delete_database}]
  - id: no-delete-customer
    assertions: [{type: trace_must_not_call_tool, tool: delete_customer}]
"""


def _agent(n: int, tools: List[str]) -> List[Dict[str, Any]]:
    trace, root = f"{n:032x}", f"{n * 1000:016x}"
    spans, t = [], 10
    for i, tool in enumerate(tools):
        spans.append(json_span(trace, f"{n * 1000 + i + 1:016x}", root, f"execute_tool {tool}", t, t + 5,
                               tool_attrs(tool)))
        t += 10
    spans.append(json_span(trace, root, None, "invoke_agent planner", 0, t + 5,
                           {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"}))
    return spans


METRICS: Dict[Tuple[str, str], int] = {}  # the last _serve's (instrument, reason or kind) -> value


def _serve(config: Any, bodies: List[bytes]) -> Tuple[Dict[str, Any], List[int]]:
    """The bodies POSTed to serve's OTLP/HTTP endpoint in turn, then a graceful stop: its
    --report-json document and the HTTP statuses (its metrics in METRICS)."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    receiver = Receiver(config, ServeOptions(grpc_endpoint=None, http_endpoint="127.0.0.1:0",
                                             report_json=os.devnull, quiet=True, settle=0.2),
                        meter_provider=MeterProvider(metric_readers=[reader]))
    receiver.start()
    try:
        statuses = [post(f"http://{receiver.http_address}/v1/traces", b, "application/json")[0] for b in bodies]
    finally:
        receiver.stop()
    data = reader.get_metrics_data()
    METRICS.clear()
    for rm in (data.resource_metrics if data else []):
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.name in ("spanassert.spans.unreadable", "spanassert.overflows"):
                    for p in m.data.data_points:
                        label = p.attributes.get("spanassert.reason") or p.attributes.get("spanassert.kind")
                        METRICS[(m.name, str(label))] = int(p.value)
    return receiver.report_dict(), statuses


def _verdicts(episodes: List[Dict[str, Any]]) -> List[Tuple[str, str, str]]:
    return sorted((ep["trace_id"], r["test"], r["verdict"]) for ep in episodes for r in ep["results"])


def _replayed(tmp_path: Path, config: Any, bodies: List[bytes]) -> List[Tuple[str, str, str]]:
    path = tmp_path / "requests.jsonl"
    path.write_bytes(b"".join(b.replace(b"\n", b" ") + b"\n" for b in bodies))
    return _verdicts(replay(config, [str(path)]).to_dict()["episodes"])


def _set(where: str, value: Any) -> Callable[[Dict[str, Any]], None]:
    def mutate(span: Dict[str, Any]) -> None:
        span[where] = value
    return mutate


# Ways a hostile or broken producer makes serve reject the span of the forbidden call.
MUTATIONS = {
    "status-string": _set("status", {"code": "STATUS_CODE_BOGUS"}),
    "span-id": _set("spanId", "zz"),
    "start-time": _set("startTimeUnixNano", "abc"),
    "end-time": _set("endTimeUnixNano", [1]),
    "attributes": _set("attributes", {"gen_ai.tool.name": "delete_database"}),
    "trace-id": _set("traceId", "not-a-trace-id"),
    "kind": _set("kind", "SPAN_KIND_BOGUS"),
}


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp("rules") / "rules.yaml"
    path.write_text(RULES)
    return load_config(path)


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_a_span_serve_rejects_leaves_no_pass_in_its_report(tmp_path: Path, config: Any, mutation: str) -> None:
    clean = _agent(1, ["search"])
    lossy = _agent(2, ["search", "delete_database"])
    bodies = [json.dumps(json_request(clean)).encode()]

    # Control: read, the forbidden call fails no-delete in both doors; the clean trace passes.
    whole = bodies + [json.dumps(json_request(lossy)).encode()]
    served, statuses = _serve(config, whole)
    assert statuses == [200, 200]
    assert _verdicts(served["episodes"]) == _replayed(tmp_path, config, whole)
    assert ("0" * 31 + "2", "no-delete", "failed") in _verdicts(served["episodes"])
    assert ("0" * 31 + "1", "no-delete", "passed") in _verdicts(served["episodes"])

    # The forbidden call's span rejected: serve answers partial success and the client will not
    # send it again. Before: serve's report passed no-delete on both traces.
    broken = copy.deepcopy(lossy)
    MUTATIONS[mutation](broken[1])
    cut = bodies + [json.dumps(json_request(broken)).encode()]
    served, statuses = _serve(config, cut)
    assert statuses == [200, 200]
    assert served["receiver"]["spans_rejected"] == 1
    assert METRICS.get(("spanassert.spans.unreadable", "rejected")) == 1  # what an operator alerts on
    got = _verdicts(served["episodes"])
    assert got and not [v for v in got if v[2] == "passed"], got
    assert got == _replayed(tmp_path, config, cut)
    assert any("rejected as unreadable" in why for ep in served["episodes"] for why in ep["incomplete"])


def test_a_request_serve_refuses_as_unreadable_leaves_no_pass_in_its_report(config: Any) -> None:
    good = json.dumps(json_request(_agent(1, ["search"]))).encode()
    served, statuses = _serve(config, [good])
    assert statuses == [200] and {v[2] for v in _verdicts(served["episodes"])} == {"passed"}
    # A body that is not OTLP JSON (a cut request, a broken client): its spans are lost. Before: passed.
    served, statuses = _serve(config, [good, b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId'])
    assert statuses == [200, 400]
    assert served["receiver"]["requests_unreadable"] == 1
    assert METRICS.get(("spanassert.overflows", "request_unreadable")) == 1
    got = _verdicts(served["episodes"])
    assert got and {v[2] for v in got} == {"inconclusive"}, got


def test_a_trace_that_lost_its_markers_and_opened_no_episode_is_no_pass_in_serve(tmp_path: Path,
                                                                                 config: Any) -> None:
    """As replay says since fd8e508 (tests/test_dropped_no_episode.py), with the real SDK's spans."""
    clean, lost = _spans(0, "lookup"), _spans(2, "delete_database")
    assert all(s.dropped_attributes for s in lost)

    def bodies(spans: List[Any]) -> List[bytes]:
        path = tmp_path / "spans.jsonl"
        write_jsonl(spans, str(path))
        return [line for line in path.read_bytes().splitlines() if line.strip()]

    served, _ = _serve(config, bodies(clean))
    assert {v[2] for v in _verdicts(served["episodes"])} == {"passed"}
    both = bodies(clean + lost)
    served, statuses = _serve(config, both)
    assert set(statuses) == {200}
    got = _verdicts(served["episodes"])
    assert got and {v[2] for v in got} == {"inconclusive"}, got  # before: passed
    assert served["overflows"]["trace_dropped_no_episode"] >= 1
    assert got == _replayed(tmp_path, config, both)
