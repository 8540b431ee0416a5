"""What each convention calls things: attribute keys, span-name markers, role tables.

The vocabulary :class:`~spanassert.mapping.mapper.Mapper` reads spans by (OTel GenAI,
OpenInference, OpenLLMetry/Traceloop, pydantic-ai, Google ADK, Strands, MCP), and the one test
that needs nothing else: :func:`surely_other`, the live processor's shortcut for a span that is
surely no GenAI span. A new convention names its keys here (CONTRIBUTING.md, "Adding a
span convention").
"""
from __future__ import annotations

from typing import Any, Callable, Final, FrozenSet, Mapping, Tuple

from . import _content as content
from ._rules import ROLE_AGENT, ROLE_OTHER, ROLE_STEP, ROLE_TOOL

# -- attribute names ------------------------------------------------------------------------------
# OTel GenAI
OPERATION: Final = "gen_ai.operation.name"
GENAI_TOOL_NAME: Final = "gen_ai.tool.name"
GENAI_CALL_ID: Final = "gen_ai.tool.call.id"
GENAI_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GENAI_RESULT: Final = "gen_ai.tool.call.result"
GENAI_AGENT_NAME: Final = "gen_ai.agent.name"
GENAI_WORKFLOW_NAME: Final = "gen_ai.workflow.name"
GENAI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GENAI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GENAI_CONVERSATION: Final = "gen_ai.conversation.id"
GENAI_TOOL_DEFINITIONS: Final = "gen_ai.tool.definitions"
ERROR_TYPE: Final = "error.type"
MCP_METHOD: Final = "mcp.method.name"
MCP_SESSION: Final = "mcp.session.id"
# OpenInference
OI_KIND: Final = "openinference.span.kind"
OI_TOOL_NAME: Final = "tool.name"
OI_TOOL_ID: Final = "tool.id"
OI_INPUT: Final = "input.value"
OI_OUTPUT: Final = "output.value"
# Precomputed embeddings (Assay's trace meta `assay.embeddings.*`, as span attributes): the final
# output's vector, the reference text's vector, and the reference text that vector is of.
EMB_RESPONSE: Final = "assay.embeddings.response"
EMB_REFERENCE: Final = "assay.embeddings.reference"
EMB_SOURCE_REFERENCE: Final = "assay.embeddings.source_reference"
EMB_MODEL: Final = "assay.embeddings.model"
OI_AGENT_NAME: Final = "agent.name"
OI_SESSION: Final = "session.id"
OI_TOOL_JSON_SCHEMA: Final = "tool.json_schema"
OI_TOOL_PARAMETERS: Final = "tool.parameters"
OI_LLM_TOOLS_PREFIX: Final = "llm.tools."  # llm.tools.<i>.tool.json_schema (flattened)
OI_LLM_TOOLS_SUFFIX: Final = ".tool.json_schema"
# OpenLLMetry / Traceloop
TL_KIND: Final = "traceloop.span.kind"
TL_ENTITY_NAME: Final = "traceloop.entity.name"
TL_ENTITY_INPUT: Final = "traceloop.entity.input"
TL_ENTITY_OUTPUT: Final = "traceloop.entity.output"
TL_WORKFLOW_NAME: Final = "traceloop.workflow.name"
TL_SESSION: Final = "traceloop.association.properties.session_id"
TL_REQUEST_TYPE: Final = "llm.request.type"  # older Traceloop model spans ("chat", "completion")
# Google ADK
ADK_ARGUMENTS: Final = "gcp.vertex.agent.tool_call_args"
ADK_RESULT: Final = "gcp.vertex.agent.tool_response"
# pydantic-ai instrumentation version 2
PYD2_ARGUMENTS: Final = "tool_arguments"
PYD2_RESULT: Final = "tool_response"
PYD2_AGENT_NAME: Final = "agent_name"
PYD_FINAL_RESULT: Final = "final_result"
# Strands
STRANDS_TOOL_STATUS: Final = "gen_ai.tool.status"
EV_DETAILS: Final = "gen_ai.client.inference.operation.details"
EV_TOOL_MESSAGE: Final = "gen_ai.tool.message"
EV_CHOICE: Final = "gen_ai.choice"
EV_EXCEPTION: Final = "exception"

STATUS_ERROR: Final = 2  # OTLP numbering
ERROR_OTHER: Final = "_OTHER"

OPERATION_ROLES: Final = {
    "execute_tool": ROLE_TOOL,
    "invoke_agent": ROLE_AGENT,
    "invoke_workflow": ROLE_AGENT,
    "chat": ROLE_STEP,
    "text_completion": ROLE_STEP,
    "generate_content": ROLE_STEP,
}
OPENINFERENCE_ROLES: Final = {
    "TOOL": ROLE_TOOL,
    "AGENT": ROLE_AGENT,
    "LLM": ROLE_STEP,
    "tool": ROLE_TOOL,
    "agent": ROLE_AGENT,
    "llm": ROLE_STEP,
}
TRACELOOP_ROLES: Final = {"tool": ROLE_TOOL, "agent": ROLE_AGENT, "workflow": ROLE_AGENT}
TRACELOOP_REQUEST_TYPES: Final = ("chat", "completion")

# Span-name markers (pydantic-ai v2, Traceloop, names without attributes), tested last.
NAME_PREFIXES: Final = ("execute_tool", "invoke_agent", "invoke_workflow", "running tool", "agent run")
NAME_SUFFIXES: Final = (".tool", ".llm")
NAME_INITIALS: Final = frozenset(p[0] for p in NAME_PREFIXES)
TOOL_PREFIX: Final = "execute_tool "
# Every attribute whose presence can make a span a tool, agent or step (see ``Mapper.role``).
MARKER_KEYS: Final = (OPERATION, OI_KIND, TL_KIND, MCP_METHOD, TL_REQUEST_TYPE)
AGENT_PREFIXES: Final = ("invoke_agent ", "invoke_workflow ")


def surely_other(name: str, attributes: Mapping[str, Any], _dict: type = dict,
                 _markers: Tuple[str, ...] = MARKER_KEYS, _initials: FrozenSet[str] = NAME_INITIALS,
                 _suffixes: Tuple[str, ...] = NAME_SUFFIXES) -> bool:
    """True for a span that is surely no GenAI span, by the built-in conventions: no marker
    attribute, no marker name. One C-level scan of the keys and cheap name guards; False also when
    it cannot tell cheaply (``Mapper.role`` then decides). The hot path of every span an agent makes
    that is not about its model or tools; with user mapping rules it does not apply."""
    if type(attributes) is not _dict:
        attributes = getattr(attributes, "_dict", None)  # type: ignore[assignment]  # the SDK's BoundedAttributes; checked below
        if type(attributes) is not _dict:
            return False
    return (attributes.keys().isdisjoint(_markers) and name[:1] not in _initials
            and not ("." in name and name.endswith(_suffixes)))


def role_from_name(name: str) -> int:
    """The slow half of the name test, reached only when a marker prefix/suffix matched."""
    if name == "execute_tool" or name.startswith(TOOL_PREFIX) or name == "running tool":
        return ROLE_TOOL
    if name in ("invoke_agent", "invoke_workflow", "agent run") or name.startswith(AGENT_PREFIXES):
        return ROLE_AGENT
    if name.endswith(".tool") and len(name) > 5:
        return ROLE_TOOL
    if name.endswith(".llm") and len(name) > 4:
        return ROLE_STEP
    return ROLE_OTHER


# Where each convention records a call's arguments and result, in order of precedence, with the
# function that removes its wrapper (LangChain's, Traceloop's entity input/output).
ARGUMENT_SOURCES: Final[Tuple[Tuple[str, Callable[[Any], Any]], ...]] = (
    (GENAI_ARGUMENTS, content.unwrap_arguments),
    (OI_INPUT, content.plain),
    (TL_ENTITY_INPUT, content.unwrap_entity_input),
    (ADK_ARGUMENTS, content.plain),
    (PYD2_ARGUMENTS, content.plain),
)
RESULT_SOURCES: Final[Tuple[Tuple[str, Callable[[Any], Any]], ...]] = (
    (GENAI_RESULT, content.unwrap_result),
    (OI_OUTPUT, content.plain),
    (TL_ENTITY_OUTPUT, content.unwrap_result),
    (ADK_RESULT, content.plain),
    (PYD2_RESULT, content.plain),
)
