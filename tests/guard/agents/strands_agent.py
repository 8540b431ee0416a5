"""Strands with spanassert's before-tool-call hook: Strands' real ``Agent`` and ``LlamaCppModel`` (an
httpx client of the llama.cpp server API) against a scripted llama.cpp API on 127.0.0.1
(model_stub.ChatCompletionsStub: each request recorded); no network."""
from __future__ import annotations

import json
from typing import Any, Dict, List

from agent_common import FINAL, SCRIPT, Run, delete_database, lookup_order, refund
from model_stub import ChatCompletionsStub
from strands import Agent, tool
from strands.models.llamacpp import LlamaCppModel

from spanassert.live.guard_adapters.strands import guard_hooks


def tool_results(request: Dict[str, Any]) -> List[str]:
    """The tool results one chat-completions request carries (its trailing `tool` messages)."""
    out: List[str] = []
    for message in reversed(request.get("messages", [])):
        if message.get("role") != "tool":
            break
        out.insert(0, json.dumps(message.get("content")))
    return out


def main() -> None:
    run = Run("strands-agent")
    guard = run.guard
    stub = ChatCompletionsStub([*(("call", name, args) for name, args in SCRIPT), ("text", FINAL)])
    agent = Agent(
        name="support",
        model=LlamaCppModel(base_url=stub.url),
        tools=[tool(lookup_order), tool(delete_database), tool(refund)],
        hooks=[guard_hooks(guard)],
        callback_handler=None,
    )
    result = agent("Refund order A7.")
    stub.close()
    run.finish(final=str(result).strip(), requests=[tool_results(r) for r in stub.requests[1:]])


if __name__ == "__main__":
    main()
