"""Conventions → tool calls, agent runs and model steps.

``Mapper`` reads a span (its name, attributes and events) by the OTel GenAI, OpenInference,
OpenLLMetry/Traceloop and framework conventions (pydantic-ai, Google ADK, Strands, MCP), after any
user ``mappings:`` rules. The live processor, the OTLP replay and the receiver all use it.
``conventions`` names each convention's attribute keys and markers; ``_content`` decodes recorded
content; ``_rules`` compiles user rules; ``usage`` reads a model step's token usage.
"""
from __future__ import annotations

from ._rules import ROLE_AGENT, ROLE_BY_NAME, ROLE_OTHER, ROLE_STEP, ROLE_TOOL, name_text
from .mapper import Mapper

__all__ = ["Mapper", "ROLE_OTHER", "ROLE_TOOL", "ROLE_AGENT", "ROLE_STEP", "ROLE_BY_NAME", "name_text"]
