"""The OpenAI Agents SDK guard adapter (a tool input guardrail) with the real SDK and its offline
ScriptedModel, in its own env (tests/fwenv.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from guard.guard_harness import check_acceptance, run_agent


@pytest.mark.timeout(1800)  # the first run may build the env (make test builds it beforehand)
def test_tool_input_guardrail_refuses_before_the_tool_runs_and_replays_the_same(tmp_path: Path) -> None:
    report, spans, rules = run_agent("openai-agents", "openai_agents_agent.py", tmp_path)
    check_acceptance(report, spans, rules)
