"""LangChain 1.x ``create_agent`` with spanassert's guard middleware (or, env GUARD_TEST_LANGGRAPH=1,
a LangGraph graph whose ToolNode has the guard as its wrap_tool_call), invoked (or, env
GUARD_TEST_ASYNC=1, ainvoked), driven by LangChain's own offline fake chat model
(GenericFakeChatModel, scripted tool calls); no network."""
from __future__ import annotations

import asyncio
import os
from typing import Any, List

from agent_common import FINAL, SCRIPT, Run, delete_database, lookup_order, refund
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from opentelemetry import trace

from spanassert.live.guard_adapters.langchain import guard_middleware

REQUESTS: List[List[str]] = []


class ScriptedChat(GenericFakeChatModel):
    """Replies from a script and records the tool results each request carries."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        REQUESTS.append([str(m.content) for m in messages if isinstance(m, ToolMessage)])
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def langgraph_app(model: Any, tools: List[Any], guard: Any) -> Any:
    """A LangGraph graph of its own: a model node and a ToolNode with the guard as its wrapper."""
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    from spanassert.live.guard_adapters.langchain import awrap_tool_call, wrap_tool_call

    graph = StateGraph(MessagesState)
    graph.add_node("model", lambda state: {"messages": [model.invoke(state["messages"])]})
    node = ToolNode(tools, wrap_tool_call=wrap_tool_call(guard), awrap_tool_call=awrap_tool_call(guard))
    graph.add_node("tools", node)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile()


def main() -> None:
    run = Run("langchain-agent")
    steps = [AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call_{i}", "type": "tool_call"}])
             for i, (name, args) in enumerate(SCRIPT)]
    model = ScriptedChat(messages=iter([*steps, AIMessage(content=FINAL)]))
    tools = [tool(lookup_order), tool(delete_database), tool(refund)]
    if os.environ.get("GUARD_TEST_LANGGRAPH") == "1":
        agent = langgraph_app(model, tools, run.guard)
    else:
        agent = create_agent(model, tools=tools, middleware=[guard_middleware(run.guard)])
    tracer = trace.get_tracer("app")
    with tracer.start_as_current_span("invoke_agent support", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}):
        question = {"messages": [{"role": "user", "content": "Refund order A7."}]}
        if os.environ.get("GUARD_TEST_ASYNC") == "1":  # ainvoke: the awrap_tool_call path
            state = asyncio.run(agent.ainvoke(question))
        else:
            state = agent.invoke(question)
    run.finish(final=state["messages"][-1].content, requests=REQUESTS[1:])


if __name__ == "__main__":
    main()
