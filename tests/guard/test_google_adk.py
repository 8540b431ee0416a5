"""The Google ADK guard adapter (issue 17, adapter 4): `before_tool_callback`, with ADK's real Agent,
Runner and Gemini model class against a scripted Gemini API on 127.0.0.1, in its own env
(tests/fwenv.py; google-adk pins opentelemetry-sdk<=1.44). ADK writes its own execute_tool span
around the callback and the tool: the decision lands on it."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Tuple

import pytest

from guard.guard_harness import check_acceptance, replay_signatures, run_agent, spans

Run = Tuple[Dict[str, Any], Path, Path]


@pytest.fixture(scope="module")
def adk_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return run_agent("google-adk", "adk_agent.py", tmp_path_factory.mktemp("adk"))


@pytest.mark.timeout(1800)  # the first run may build the env (make test builds it beforehand)
def test_a_forbidden_tool_is_refused_on_adks_own_span_and_replays_the_same(adk_run: Run) -> None:
    report, out, rules = adk_run
    assert report["ran"]["delete_database"] == [], report["ran"]
    assert 20 in report["ran"]["refund"] and report["ran"]["lookup_order"] == ["A7"], report["ran"]
    requests = ["\n".join(r) for r in report["requests"]]
    refusal = "spanassert blocked the call of `delete_database`: rule `no-db-delete`"
    assert refusal in requests[1] and refusal not in requests[0], requests
    assert report["final"] == "Refunded 20.00 on order A7."
    tool_spans = [s for s in spans(out) if s["attributes"].get("gen_ai.operation.name") == "execute_tool"]
    assert {s["scope"] for s in tool_spans} == {"gcp.vertex.agent"}  # ADK's spans, no extra refusal span
    dropped = [s for s in tool_spans if s["attributes"]["gen_ai.tool.name"] == "delete_database"]
    assert [[e["attributes"].get("gen_ai.evaluation.score.label") for e in s["events"]
             if e["name"] == "gen_ai.evaluation.result"] for s in dropped] == [["blocked"]]
    code, replayed = replay_signatures(rules, out)
    assert replayed == report["live"] and code == 1


@pytest.mark.xfail(strict=True, reason=(
    "guard core: ADK opens its execute_tool span before before_tool_callback, with no arguments on it; "
    "Guard.check inside that span takes the span start's decision (Engine.started_call), so argument "
    "rules never see the callback's arguments and the refund over the cap runs (alerted at its end). "
    "Asked of guard-core (/work/notes/guard-fw-b-requests.md). Strict: when it passes, drop the marker."))
def test_the_whole_acceptance_including_the_capped_argument(adk_run: Run) -> None:
    check_acceptance(*adk_run)
