"""The Strands guard adapter (issue 17, adapter 5): the before-tool-call hook, with Strands' real
Agent and LlamaCppModel client against a scripted llama.cpp API on 127.0.0.1, in its own env
(tests/fwenv.py; Strands pins mcp<2.2)."""
from __future__ import annotations

from pathlib import Path

import pytest

from guard.guard_harness import check_acceptance, run_agent, spans


@pytest.mark.timeout(1800)  # the first run may build the env (make test builds it beforehand)
def test_guard_refuses_before_the_tool_runs_and_replays_the_same(tmp_path: Path) -> None:
    report, out, rules = run_agent("strands", "strands_agent.py", tmp_path)
    check_acceptance(report, out, rules)
    # Strands writes no span for a cancelled tool: the hook's refusal spans sit in the agent's trace.
    refused = [s for s in spans(out) if s["attributes"].get("spanassert.guard.decision") == "blocked"]
    assert sorted(s["attributes"]["gen_ai.tool.name"] for s in refused) == ["delete_database", "refund"]
    assert {s["scope"] for s in refused} == {"spanassert.guard"}
