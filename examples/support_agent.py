"""A scripted customer-support agent, instrumented per the OpenTelemetry GenAI semantic conventions.

No model, no network, no API key: each scenario is a fixed plan of tool calls, so runs are
repeatable. What is real is the telemetry: the spans are exactly what an instrumented agent emits.

- one ``invoke_agent support-agent`` root span per conversation turn (``gen_ai.operation.name``,
  ``gen_ai.agent.name``, ``gen_ai.conversation.id``, the answer in ``gen_ai.output.messages``);
- one ``chat <model>`` span per model step;
- one ``execute_tool <name>`` span per tool call (``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
  ``gen_ai.tool.call.arguments`` / ``.result`` as JSON; ERROR status and ``error.type`` on failure).

Tool name and arguments are set when the tool span starts, so a live ``AssertionSpanProcessor``
reports a forbidden call before the tool body runs.

Run it alone (spans printed as OTLP JSON Lines on stdout)::

    python examples/support_agent.py
"""
from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

AGENT_NAME = "support-agent"
MODEL = "scripted-support-model"  # a name on the spans; nothing is called
PROVIDER = "scripted"

# -- the "backend" the tools talk to (in memory) -----------------------------------------------------
ORDERS: Dict[str, Dict[str, Any]] = {
    "ORD-10027": {"order_id": "ORD-10027", "customer_id": "CUS-881", "status": "delivered", "total": 129.0,
                  "items": ["wireless earbuds"]},
    "ORD-10031": {"order_id": "ORD-10031", "customer_id": "CUS-412", "status": "shipped", "total": 64.5,
                  "items": ["desk lamp"]},
    "ORD-10042": {"order_id": "ORD-10042", "customer_id": "CUS-977", "status": "delivered", "total": 1899.0,
                  "items": ["4K projector"]},
}
CUSTOMERS: Dict[str, Dict[str, Any]] = {
    "dana@example.com": {"customer_id": "CUS-412", "name": "Dana", "orders": ["ORD-10031"]},
}


class ToolError(Exception):
    """A tool that failed; the span gets ERROR status and ``error.type``."""


def lookup_order(order_id: str) -> Dict[str, Any]:
    order = ORDERS.get(order_id)
    if order is None:
        raise ToolError(f"no order {order_id}")
    return dict(order)


def get_refund_policy(order_id: str) -> Dict[str, Any]:
    return {"order_id": order_id, "refundable": True, "window_days": 30, "max_refund": 500}


def issue_refund(order_id: str, amount: float, reason: str) -> Dict[str, Any]:
    return {"refund_id": f"RF-{order_id[-5:]}", "order_id": order_id, "amount": amount, "status": "issued"}


def track_shipment(order_id: str) -> Dict[str, Any]:
    raise ToolError("carrier API unavailable (HTTP 503)")


def lookup_customer(email: str) -> Dict[str, Any]:
    customer = CUSTOMERS.get(email)
    if customer is None:
        raise ToolError(f"no customer with email {email}")
    return dict(customer)


def delete_customer(customer_id: str) -> Dict[str, Any]:
    return {"customer_id": customer_id, "deleted": True}


TOOLS: Dict[str, Callable[..., Dict[str, Any]]] = {
    f.__name__: f for f in (lookup_order, get_refund_policy, issue_refund, track_shipment, lookup_customer,
                            delete_customer)
}


class Scenario:
    """One conversation turn: what the user asked, the tool calls the agent makes, its answer."""

    __slots__ = ("name", "conversation_id", "prompt", "plan", "answer")

    def __init__(self, name: str, conversation_id: str, prompt: str, plan: Sequence[Tuple[str, Dict[str, Any]]],
                 answer: str) -> None:
        self.name = name
        self.conversation_id = conversation_id
        self.prompt = prompt
        self.plan = list(plan)
        self.answer = answer


SCENARIOS: List[Scenario] = [
    Scenario(
        "order-status", "conv-order-status",
        "Where is my order ORD-10031?",
        [("lookup_order", {"order_id": "ORD-10031"}), ("track_shipment", {"order_id": "ORD-10031"})],
        "Your order ORD-10031 has shipped. Live tracking is unavailable right now; please check again later.",
    ),
    Scenario(
        "refund-within-policy", "conv-refund-earbuds",
        "My earbuds from ORD-10027 stopped working, can I get my money back?",
        [("lookup_order", {"order_id": "ORD-10027"}), ("get_refund_policy", {"order_id": "ORD-10027"}),
         ("issue_refund", {"order_id": "ORD-10027", "amount": 129.0, "reason": "defective"})],
        "I have refunded 129.00 for order ORD-10027; you will see it within 5 business days.",
    ),
    Scenario(
        "refund-over-limit", "conv-refund-projector",
        "The projector from ORD-10042 is too loud. Refund it all, now.",
        [("lookup_order", {"order_id": "ORD-10042"}),
         ("issue_refund", {"order_id": "ORD-10042", "amount": 1899.0, "reason": "customer insisted"})],
        "I have refunded 1899.00 for order ORD-10042.",
    ),
    Scenario(
        "close-account", "conv-close-account",
        "Please close my account, my email is dana@example.com.",
        [("lookup_customer", {"email": "dana@example.com"}), ("delete_customer", {"customer_id": "CUS-412"})],
        "Your account has been closed.",
    ),
]


class SupportAgent:
    """Runs scenarios, emitting GenAI spans through ``tracer_provider`` (the global one by default).

    ``narrate`` is called with a line before each step, so a caller can show the agent at work.
    """

    def __init__(self, tracer_provider: Optional[trace.TracerProvider] = None,
                 narrate: Optional[Callable[[str], None]] = None) -> None:
        self.tracer = trace.get_tracer("examples.support_agent", "0.1.0", tracer_provider=tracer_provider)
        self.narrate = narrate or (lambda line: None)

    def run(self, scenario: Scenario) -> str:
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": AGENT_NAME,
            "gen_ai.conversation.id": scenario.conversation_id,
            "gen_ai.provider.name": PROVIDER,
            "gen_ai.request.model": MODEL,
        }
        with self.tracer.start_as_current_span(f"invoke_agent {AGENT_NAME}", kind=SpanKind.INTERNAL,
                                               attributes=attributes) as root:
            root.set_attribute("gen_ai.input.messages", json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": scenario.prompt}]}]))
            for n, (tool, arguments) in enumerate(scenario.plan, start=1):
                call_id = f"call_{scenario.conversation_id}_{n}"
                self._model_step(tool_call=(tool, call_id))
                self._call_tool(tool, arguments, call_id)
            self._model_step(answer=scenario.answer)
            root.set_attribute("gen_ai.output.messages", json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": scenario.answer}]}]))
        return scenario.answer

    def _model_step(self, *, tool_call: Optional[Tuple[str, str]] = None, answer: Optional[str] = None) -> None:
        with self.tracer.start_as_current_span(f"chat {MODEL}", kind=SpanKind.CLIENT, attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": PROVIDER,
            "gen_ai.request.model": MODEL,
        }) as span:
            if tool_call is not None:
                # The model only *asks* for the call; the call itself gets its own span below.
                part = {"type": "tool_call", "id": tool_call[1], "name": tool_call[0]}
                span.set_attribute("gen_ai.response.finish_reasons", ["tool_calls"])
            else:
                part = {"type": "text", "content": answer or ""}
                span.set_attribute("gen_ai.response.finish_reasons", ["stop"])
            span.set_attribute("gen_ai.output.messages", json.dumps([{"role": "assistant", "parts": [part]}]))

    def _call_tool(self, tool: str, arguments: Dict[str, Any], call_id: str) -> None:
        self.narrate(f"  → {tool}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})")
        with self.tracer.start_as_current_span(f"execute_tool {tool}", kind=SpanKind.INTERNAL, attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.type": "function",
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.call.arguments": json.dumps(arguments),
        }, record_exception=False, set_status_on_exception=False) as span:
            try:
                result = TOOLS[tool](**arguments)
            except ToolError as exc:
                span.set_attribute("error.type", type(exc).__name__)
                span.set_status(Status(StatusCode.ERROR, str(exc)))
                span.set_attribute("gen_ai.tool.call.result", json.dumps({"error": str(exc)}))
                self.narrate(f"    ✗ {tool} failed: {exc}")
                return
            span.set_attribute("gen_ai.tool.call.result", json.dumps(result))
            self.narrate(f"    ← {tool} returned")


def main() -> None:
    from spanassert.otlp.writers import file_span_exporter  # OTel's FileSpanExporter where installed
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(file_span_exporter()))
    agent = SupportAgent(provider)
    for scenario in SCENARIOS:
        agent.run(scenario)
    provider.shutdown()


if __name__ == "__main__":
    main()
