"""A scripted Strands agent behind the guard, run in the strands env (tests/fwenv.py):
``python strands_agent.py RULES EXPORT OUT``.

The real Strands ``Agent`` with its real ``LlamaCppModel`` (an httpx client of the llama.cpp server
API) talking to :class:`model_stub.ChatCompletionsStub` on 127.0.0.1. The scripted model asks for a
forbidden tool, then a refund over the cap, then one within it, then answers. The tools set flags
when their bodies run. Strands writes its spans through the global tracer provider, whose
AssertionSpanProcessor exports them to EXPORT (OTLP JSON Lines); OUT gets the flags, the model
requests, the final answer and the live verdicts as JSON.
"""
from __future__ import annotations

import json
import sys
from typing import Any, Dict, List

from model_stub import ChatCompletionsStub

TURNS = [
    ("call", "delete_database", {"name": "prod"}),
    ("call", "issue_refund", {"order_id": "A1", "amount": 500}),
    ("call", "issue_refund", {"order_id": "A1", "amount": 20}),
    ("text", "I could not drop the database or refund 500; I refunded 20 on A1."),
]


def main(rules: str, export: str, out: str) -> None:
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
    trace.set_tracer_provider(provider)  # Strands writes its spans through the global provider
    guard = processor.guard()

    from strands import Agent, tool
    from strands.models.llamacpp import LlamaCppModel

    from spanassert.live.guard_adapters.strands import guard_hooks

    ran: Dict[str, List[Any]] = {}

    @tool
    def delete_database(name: str) -> str:
        """Drop a database."""
        ran.setdefault("delete_database", []).append({"name": name})
        return f"dropped {name}"

    @tool
    def issue_refund(order_id: str, amount: float) -> str:
        """Refund part of an order."""
        ran.setdefault("issue_refund", []).append({"order_id": order_id, "amount": amount})
        return f"refunded {amount} on {order_id}"

    stub = ChatCompletionsStub(TURNS)
    # [doc: strands]
    agent = Agent(
        name="support",
        model=LlamaCppModel(base_url=stub.url),
        tools=[delete_database, issue_refund],
        hooks=[guard_hooks(guard)],
        callback_handler=None,
    )
    # [/doc]
    result = agent("Clean up and refund order A1.")
    stub.close()
    provider.shutdown()
    with open(out, "w", encoding="utf-8") as f:
        json.dump({
            "ran": ran, "final": str(result).strip(), "requests": stub.requests, "paths": stub.paths,
            "live": {ep.key: {t: v.value for t, v in ep.test_verdicts().items()} for ep in episodes},
        }, f)


if __name__ == "__main__":
    main(*sys.argv[1:4])
