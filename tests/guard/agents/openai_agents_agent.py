"""The OpenAI Agents SDK with spanassert's tool input guardrail, driven by the SDK's own offline
ScriptedModel (agents.testing: scripted function calls, the requests recorded); no network."""
from __future__ import annotations

import asyncio
from typing import Any, List

from agent_common import FINAL, SCRIPT, Run, delete_database, lookup_order, refund
from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call
from opentelemetry import trace

from spanassert.live.guard_adapters.openai_agents import guard_tools


def tool_outputs(items: Any) -> List[str]:
    """The tool results one model request carries (function_call_output items)."""
    if not isinstance(items, list):
        return []
    out = []
    for item in items:
        item = item if isinstance(item, dict) else getattr(item, "model_dump", dict)()
        if item.get("type") == "function_call_output":
            out.append(str(item.get("output")))
    return out


async def main() -> None:
    set_tracing_disabled(True)  # the SDK's own trace export would go to the network
    run = Run("openai-agents-agent")
    model = ScriptedModel([*([function_call(name, args, call_id=f"call_{i}")] for i, (name, args) in enumerate(SCRIPT)),
                           [assistant_message(FINAL)]])
    tools = guard_tools([function_tool(lookup_order), function_tool(delete_database), function_tool(refund)], run.guard)
    agent = Agent(name="support", instructions="Handle refunds.", model=model, tools=tools)
    with trace.get_tracer("app").start_as_current_span("invoke_agent support", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}):
        result = await Runner.run(agent, "Refund order A7.")
    requests = [tool_outputs(call.input) for call in model.calls]
    run.finish(final=result.final_output, requests=requests[1:])


if __name__ == "__main__":
    asyncio.run(main())
