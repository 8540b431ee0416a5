"""Strands adapter (issue 17, adapter 5): the before-tool-call hook, in the strands env (Strands pins
mcp<2.2), with Strands' real LlamaCppModel client against a scripted llama.cpp API on 127.0.0.1."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

from .agent_harness import assert_capped_argument_refused, assert_forbidden_tool_refused, run_scripted_agent


def tool_results_sent(request: Dict[str, Any]) -> str:
    """The tool results in a chat-completions request (messages with role `tool`) after the last
    assistant turn."""
    messages = request.get("messages", [])
    tail = []
    for m in reversed(messages):
        if m.get("role") != "tool":
            break
        tail.append(json.dumps(m.get("content")))
    return " ".join(reversed(tail))


def test_strands_hook_refuses_before_the_tool_runs_and_the_agent_goes_on(tmp_path: Path) -> None:
    run = run_scripted_agent("strands", "strands_agent.py", tmp_path)
    assert_forbidden_tool_refused(run, tool_results_sent)
    assert_capped_argument_refused(run, tool_results_sent)
    # Strands writes no span for a cancelled tool: the hook's refusal spans sit in the agent's trace.
    agent_spans = [s for s in run.spans if s.name.startswith("invoke_agent")]
    assert len(agent_spans) == 1
