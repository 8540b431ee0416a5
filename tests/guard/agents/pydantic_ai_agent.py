"""pydantic-ai with spanassert's guard capability, driven by its offline FunctionModel (scripted tool
calls, the requests recorded): with pydantic-ai's own OpenTelemetry instrumentation, or (env
GUARD_TEST_INSTRUMENT=0) without it, the adapter writing the tool spans."""
from __future__ import annotations

import asyncio
import os
from typing import Any, List

from agent_common import FINAL, SCRIPT, Run, delete_database, lookup_order, refund
from opentelemetry import trace
from pydantic_ai import Agent
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from spanassert.live.guard_adapters.pydantic_ai import guard_capability

REQUESTS: List[List[str]] = []


def scripted(messages: List[Any], info: AgentInfo) -> ModelResponse:  # noqa: ARG001 - FunctionModel's signature
    REQUESTS.append([str(part.content) for m in messages if isinstance(m, ModelRequest)
                     for part in m.parts if isinstance(part, ToolReturnPart)])
    step = len(REQUESTS) - 1
    if step < len(SCRIPT):
        name, args = SCRIPT[step]
        return ModelResponse(parts=[ToolCallPart(tool_name=name, args=args, tool_call_id=f"call_{step}")])
    return ModelResponse(parts=[TextPart(FINAL)])


async def main() -> None:
    run = Run("pydantic-ai-agent")
    instrumented = os.environ.get("GUARD_TEST_INSTRUMENT", "1") == "1"
    if instrumented:
        Agent.instrument_all()  # pydantic-ai's own OpenTelemetry spans (agent run, model requests, tools)
    agent = Agent(FunctionModel(scripted), name="support", tools=[lookup_order, delete_database, refund],
                  capabilities=[guard_capability(run.guard)])
    if instrumented:
        result = await agent.run("Refund order A7.")
    else:  # no pydantic-ai spans: the app's agent span, and the adapter's own tool spans
        with trace.get_tracer("app").start_as_current_span("invoke_agent support", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}):
            result = await agent.run("Refund order A7.")
    run.finish(final=result.output, requests=REQUESTS[1:])


if __name__ == "__main__":
    asyncio.run(main())
