"""A scripted travel-booking agent instrumented with OpenInference attributes (as Arize Phoenix
instrumentations write them) instead of the GenAI conventions. spanassert reads both the same way.

- agent span: ``openinference.span.kind = AGENT``, ``agent.name``, ``session.id``, the answer in
  ``output.value``;
- model steps: ``openinference.span.kind = LLM``;
- tool calls: ``openinference.span.kind = TOOL``, ``tool.name``, ``tool.id``, arguments as JSON in
  ``input.value``, result in ``output.value``.

Run it alone (spans printed as OTLP JSON Lines on stdout)::

    python examples/openinference_agent.py
"""
from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

AGENT_NAME = "travel-agent"
MODEL = "scripted-travel-model"


def search_flights(origin: str, destination: str, date: str) -> Dict[str, Any]:
    return {"flights": [{"flight": "SA120", "price": 420.0}, {"flight": "SA388", "price": 2380.0}]}


def book_flight(flight: str, passengers: int, price: float) -> Dict[str, Any]:
    return {"booking_reference": f"BK-{flight}", "passengers": passengers, "price": price}


def send_confirmation(booking_reference: str) -> Dict[str, Any]:
    return {"sent": True, "booking_reference": booking_reference}


TOOLS: Dict[str, Callable[..., Dict[str, Any]]] = {
    f.__name__: f for f in (search_flights, book_flight, send_confirmation)
}

SCENARIOS: List[Tuple[str, str, Sequence[Tuple[str, Dict[str, Any]]], str]] = [
    ("economy-booking", "sess-economy",
     [("search_flights", {"origin": "AMS", "destination": "LIS", "date": "2025-06-02"}),
      ("book_flight", {"flight": "SA120", "passengers": 2, "price": 420.0}),
      ("send_confirmation", {"booking_reference": "BK-SA120"})],
     "Booked SA120 for 2 passengers. Booking reference BK-SA120."),
    ("over-budget-booking", "sess-premium",
     [("search_flights", {"origin": "AMS", "destination": "JFK", "date": "2025-06-09"}),
      ("book_flight", {"flight": "SA388", "passengers": 1, "price": 2380.0})],
     "Booked SA388. Booking reference BK-SA388."),
]


class TravelAgent:
    def __init__(self, tracer_provider: Optional[trace.TracerProvider] = None) -> None:
        self.tracer = trace.get_tracer("examples.openinference_agent", "0.1.0", tracer_provider=tracer_provider)

    def run(self, session_id: str, plan: Sequence[Tuple[str, Dict[str, Any]]], answer: str) -> str:
        with self.tracer.start_as_current_span(AGENT_NAME, attributes={
            "openinference.span.kind": "AGENT",
            "agent.name": AGENT_NAME,
            "session.id": session_id,
        }) as root:
            for n, (tool, arguments) in enumerate(plan, start=1):
                with self.tracer.start_as_current_span("ChatCompletion", attributes={
                    "openinference.span.kind": "LLM", "llm.model_name": MODEL,
                }):
                    pass
                with self.tracer.start_as_current_span(tool, attributes={
                    "openinference.span.kind": "TOOL",
                    "tool.name": tool,
                    "tool.id": f"{session_id}-{n}",
                    "input.value": json.dumps(arguments),
                    "input.mime_type": "application/json",
                }) as span:
                    result = TOOLS[tool](**arguments)
                    span.set_attribute("output.value", json.dumps(result))
                    span.set_attribute("output.mime_type", "application/json")
                    span.set_status(Status(StatusCode.OK))
            root.set_attribute("output.value", answer)
        return answer


def main() -> None:
    from spanassert.otlp.writers import file_span_exporter  # OTel's FileSpanExporter where installed
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(file_span_exporter()))
    agent = TravelAgent(provider)
    for _name, session, plan, answer in SCENARIOS:
        agent.run(session, plan, answer)
    provider.shutdown()


if __name__ == "__main__":
    main()
