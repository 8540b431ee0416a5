"""The LangChain / LangGraph guard adapter with the real frameworks (langchain 1.x create_agent and its
tool-call middleware; a LangGraph graph's ToolNode wrapper), LangChain's offline fake chat model, in
its own env (tests/fwenv.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from guard.guard_harness import check_acceptance, run_agent


@pytest.mark.timeout(1800)  # the first run may build the env (make test builds it beforehand)
@pytest.mark.parametrize("graph,run", [("create_agent", "invoke"), ("create_agent", "ainvoke"),
                                       ("langgraph", "invoke"), ("langgraph", "ainvoke")],
                         ids=["middleware", "middleware-async", "langgraph-toolnode", "langgraph-toolnode-async"])
def test_guard_refuses_before_the_tool_runs_and_replays_the_same(tmp_path: Path, graph: str, run: str) -> None:
    env = {"GUARD_TEST_LANGGRAPH": "1" if graph == "langgraph" else "0",
           "GUARD_TEST_ASYNC": "1" if run == "ainvoke" else "0"}
    report, spans, rules = run_agent("langchain", "langchain_agent.py", tmp_path, env=env)
    check_acceptance(report, spans, rules)
