"""Google ADK with spanassert's callbacks (``before_tool_callback``, ``after_model_callback``): ADK's
real ``Agent``, ``InMemoryRunner`` and ``Gemini`` model class, whose google-genai client talks to a
scripted Gemini API on 127.0.0.1 (model_stub.GeminiStub: each request recorded); no network."""
from __future__ import annotations

import asyncio
import json
import os
from typing import Any, Dict, List

from agent_common import FINAL, SCRIPT, Run, delete_database, lookup_order, refund
from model_stub import GeminiStub

# ADK records tool arguments and results on its spans only when asked (OTel's content switch).
os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
os.environ.setdefault("GOOGLE_API_KEY", "stub-key")  # the stub ignores it; the client wants one
os.environ.pop("GOOGLE_GENAI_USE_VERTEXAI", None)

# (imported after the environment above: ADK and google-genai read it)
from google.adk.agents import Agent
from google.adk.models import Gemini
from google.adk.runners import InMemoryRunner
from google.genai import types

from spanassert.live.guard_adapters.google_adk import guard_callbacks


def function_responses(request: Dict[str, Any]) -> List[str]:
    """The tool results one generateContent request carries (its last turn's function responses)."""
    contents = request.get("contents") or [{}]
    return [json.dumps(p["functionResponse"]) for p in contents[-1].get("parts", []) if "functionResponse" in p]


def main() -> None:
    run = Run("google-adk-agent")
    guard = run.guard
    stub = GeminiStub([*(("call", name, args) for name, args in SCRIPT), ("text", FINAL)])
    agent = Agent(
        name="support",
        model=Gemini(model="gemini-scripted", base_url=stub.url),
        instruction="Handle refunds.",
        tools=[lookup_order, delete_database, refund],
        **guard_callbacks(guard),
    )
    runner = InMemoryRunner(agent=agent, app_name="guard-test")

    async def converse() -> str:
        session = await runner.session_service.create_session(app_name="guard-test", user_id="u1")
        final = ""
        message = types.Content(role="user", parts=[types.Part(text="Refund order A7.")])
        async for event in runner.run_async(user_id="u1", session_id=session.id, new_message=message):
            if event.is_final_response() and event.content and event.content.parts:
                final = "".join(p.text or "" for p in event.content.parts)
        return final

    final = asyncio.run(converse())
    stub.close()
    run.finish(final=final, requests=[function_responses(r) for r in stub.requests[1:]])


if __name__ == "__main__":
    main()
