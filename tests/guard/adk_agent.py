"""A scripted Google ADK agent behind the guard, run in the google-adk env (tests/fwenv.py):
``python adk_agent.py RULES EXPORT OUT``.

The real ADK ``Agent`` and ``InMemoryRunner`` with ADK's real ``Gemini`` model class, whose
google-genai client talks to :class:`model_stub.GeminiStub` on 127.0.0.1. The scripted model asks
for a forbidden tool, then a refund over the cap, then one within it, then answers. The tools set
flags when their bodies run. Spans go through the AssertionSpanProcessor to EXPORT (OTLP JSON
Lines); OUT gets the flags, the model requests, the final answer and the live verdicts as JSON.
"""
from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any, Dict, List

from model_stub import GeminiStub

TURNS = [
    ("call", "delete_database", {"name": "prod"}),
    ("call", "issue_refund", {"order_id": "A1", "amount": 500}),
    ("call", "issue_refund", {"order_id": "A1", "amount": 20}),
    ("text", "I could not drop the database or refund 500; I refunded 20 on A1."),
]


def main(rules: str, export: str, out: str) -> None:
    # ADK records tool arguments and results on its spans only when asked (OTel's content switch).
    os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    os.environ.setdefault("GOOGLE_API_KEY", "stub-key")  # the stub ignores it; the client wants one
    os.environ.pop("GOOGLE_GENAI_USE_VERTEXAI", None)
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from spanassert import AssertionSpanProcessor, load_config
    from spanassert.otlp.writers import JsonLinesSpanExporter

    episodes: List[Any] = []
    processor = AssertionSpanProcessor(load_config(rules), export=SimpleSpanProcessor(JsonLinesSpanExporter(export)),
                                       on_episode=episodes.append)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)  # ADK writes its spans through the global provider
    guard = processor.guard()

    from google.adk.agents import Agent
    from google.adk.models import Gemini
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    from spanassert.live.guard_adapters.google_adk import before_tool_callback

    ran: Dict[str, List[Any]] = {}

    def delete_database(name: str) -> Dict[str, Any]:
        """Drop a database."""
        ran.setdefault("delete_database", []).append({"name": name})
        return {"dropped": name}

    def issue_refund(order_id: str, amount: float) -> Dict[str, Any]:
        """Refund part of an order."""
        ran.setdefault("issue_refund", []).append({"order_id": order_id, "amount": amount})
        return {"refunded": amount, "order_id": order_id}

    stub = GeminiStub(TURNS)
    # [doc: google-adk]
    agent = Agent(
        name="support",
        model=Gemini(model="gemini-scripted", base_url=stub.url),
        instruction="Help the customer.",
        tools=[delete_database, issue_refund],
        before_tool_callback=before_tool_callback(guard),
    )
    # [/doc]
    runner = InMemoryRunner(agent=agent, app_name="guard-test")

    async def run() -> str:
        session = await runner.session_service.create_session(app_name="guard-test", user_id="u1")
        final = ""
        message = types.Content(role="user", parts=[types.Part(text="Clean up and refund order A1.")])
        async for event in runner.run_async(user_id="u1", session_id=session.id, new_message=message):
            if event.is_final_response() and event.content and event.content.parts:
                final = "".join(p.text or "" for p in event.content.parts)
        return final

    final = asyncio.run(run())
    stub.close()
    provider.shutdown()
    with open(out, "w", encoding="utf-8") as f:
        json.dump({
            "ran": ran, "final": final, "requests": stub.requests, "paths": stub.paths,
            "live": {ep.key: {t: v.value for t, v in ep.test_verdicts().items()} for ep in episodes},
        }, f)


if __name__ == "__main__":
    main(*sys.argv[1:4])
