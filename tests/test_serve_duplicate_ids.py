"""serve and spans that share a span id (review10). serve drops a span whose id its trace already
has, taking it for a retried request; but a span with the same id and other content is another
span, and replay judges both. Before, a copy sent first hid a forbidden call sent under its id:
serve's report passed `trace_must_not_call_tool` where replay of the same requests failed it. A
true retry (the same span again) is still dropped and counted, and changes no verdict."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from test_serve_receiver import json_request, json_span, tool_attrs  # noqa: E402

from spanassert.config import load_config  # noqa: E402
from spanassert.otlp import records_from_json  # noqa: E402
from spanassert.replay import replay  # noqa: E402
from spanassert.serve import Receiver, ServeOptions  # noqa: E402

RULES = """
version: 1
tests:
  - id: no-delete
    assertions: [{type: trace_must_not_call_tool, tool: delete_database}]
  - id: refund-cap
    assertions:
      - type: trace_args_valid
        tool: refund
        schema: {properties: {amount: {maximum: 100}}}
"""

T = f"{7:032x}"
ROOT, X = f"{7000:016x}", f"{7001:016x}"


def _root() -> Dict[str, Any]:
    return json_span(T, ROOT, None, "invoke_agent planner", 0, 100,
                     {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"})


def _tool(tool: str, args: Dict[str, Any], start: int = 10) -> Dict[str, Any]:
    return json_span(T, X, ROOT, f"execute_tool {tool}", start, start + 10, tool_attrs(tool, args))


# (first copy, second copy under the same span id): what the second hides if it is dropped.
PAIRS = {
    "forbidden-tool": (_tool("search", {}), _tool("delete_database", {})),
    "forbidden-first": (_tool("delete_database", {}), _tool("search", {})),
    "arguments": (_tool("refund", {"amount": 5}), _tool("refund", {"amount": 5000})),
    "start-time": (_tool("search", {}), _tool("delete_database", {}, start=30)),
}


def _verdicts(episodes: List[Dict[str, Any]]) -> List[Tuple[str, str]]:
    return sorted((r["test"], r["verdict"]) for ep in episodes for r in ep["results"])


def _serve(config: Any, requests: List[Dict[str, Any]]) -> Tuple[Dict[str, Any], int]:
    receiver = Receiver(config, ServeOptions(grpc_endpoint=None, http_endpoint=None, report_json=os.devnull,
                                             quiet=True, settle=0.5))
    receiver.start()
    try:
        for req in requests:
            assert receiver.accept(records_from_json(req, "test"), None, 0)
    finally:
        receiver.stop()
    return receiver.report_dict(), receiver.duplicates


@pytest.mark.parametrize("one_request", [False, True], ids=["two-requests", "one-request"])
@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_a_span_with_an_id_already_seen_and_other_content_is_judged(tmp_path: Path, pair: str,
                                                                     one_request: bool) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    config = load_config(rules)
    first, second = PAIRS[pair]
    requests = ([json_request([first, second, _root()])] if one_request
                else [json_request([first]), json_request([second, _root()])])
    path = tmp_path / "requests.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in requests))
    replayed = _verdicts(replay(config, [str(path)]).to_dict()["episodes"])
    assert "failed" in {v for _, v in replayed}, replayed  # the second copy breaks a rule
    served, dropped = _serve(config, requests)
    assert _verdicts(served["episodes"]) == replayed  # before: serve passed what replay failed
    assert dropped == 0

    # A true retry (the same request again) is dropped and counted, and changes no verdict.
    served, dropped = _serve(config, requests + requests)
    assert _verdicts(served["episodes"]) == replayed
    assert dropped == sum(len(r["resourceSpans"][0]["scopeSpans"][0]["spans"]) for r in requests)
