"""Which spans are tool calls, agent runs and model steps, and what they recorded.

One :class:`Mapper` serves the live SpanProcessor, the OTLP file replay and the OTLP receiver, so
all three read spans the same way. ``role()`` runs for every span on the application's hot path:
a span carrying none of the GenAI / OpenInference / Traceloop markers costs a handful of dict
lookups and two string tests. Everything else runs only for the few spans that matter.

Only dedicated spans count as tool calls. A model (chat) span whose output messages *mention* tool
calls is a step, never a call: the call itself has its own span, and counting both would double it.
"""
from __future__ import annotations

import gc
from types import MappingProxyType
from typing import Any, Callable, Dict, Final, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..config.model import MappingRule
from . import _content as content
from ._rules import ROLE_OTHER, ROLE_STEP, ROLE_TOOL, CompiledRule, Getter, compile_rules, name_text
from .conventions import (
    AGENT_PREFIXES,
    ARGUMENT_SOURCES,
    EMB_MODEL,
    EMB_REFERENCE,
    EMB_RESPONSE,
    EMB_SOURCE_REFERENCE,
    ERROR_OTHER,
    ERROR_TYPE,
    EV_CHOICE,
    EV_DETAILS,
    EV_EXCEPTION,
    EV_TOOL_MESSAGE,
    GENAI_AGENT_NAME,
    GENAI_ARGUMENTS,
    GENAI_CALL_ID,
    GENAI_CONVERSATION,
    GENAI_INPUT_MESSAGES,
    GENAI_OUTPUT_MESSAGES,
    GENAI_RESULT,
    GENAI_TOOL_DEFINITIONS,
    GENAI_TOOL_NAME,
    GENAI_WORKFLOW_NAME,
    MCP_METHOD,
    MCP_SESSION,
    NAME_INITIALS,
    NAME_PREFIXES,
    NAME_SUFFIXES,
    OI_AGENT_NAME,
    OI_INPUT,
    OI_KIND,
    OI_LLM_TOOLS_PREFIX,
    OI_LLM_TOOLS_SUFFIX,
    OI_OUTPUT,
    OI_SESSION,
    OI_TOOL_ID,
    OI_TOOL_JSON_SCHEMA,
    OI_TOOL_NAME,
    OI_TOOL_PARAMETERS,
    OPENINFERENCE_ROLES,
    OPERATION,
    OPERATION_ROLES,
    PYD2_AGENT_NAME,
    PYD_FINAL_RESULT,
    RESULT_SOURCES,
    STATUS_ERROR,
    STRANDS_TOOL_STATUS,
    TL_ENTITY_NAME,
    TL_ENTITY_OUTPUT,
    TL_KIND,
    TL_REQUEST_TYPE,
    TL_SESSION,
    TL_WORKFLOW_NAME,
    TOOL_PREFIX,
    TRACELOOP_REQUEST_TYPES,
    TRACELOOP_ROLES,
    role_from_name,
    surely_other,
)

# ``surely_other`` lives with the conventions; the live processor imports it from here.
__all__ = ["EVENTS_SOURCE", "Mapper", "Others", "lookup", "surely_other"]

def lookup(attributes: Mapping[str, Any]) -> Getter:
    """A ``get`` for the attribute mapping that does not raise internally on a missing key.

    The SDK's ``BoundedAttributes`` inherits ``Mapping.get``, which raises and catches a KeyError
    for every absent key (about twenty times the cost of a dict lookup), and a span's
    ``.attributes`` is a ``MappingProxyType`` that forwards to exactly that. Most keys we look for
    are absent on most spans, so we read the backing dict instead (reads need no lock: the GIL).
    """
    cls = type(attributes)
    if cls is dict:
        return attributes.get
    inner: Any = attributes
    if cls is MappingProxyType:
        # A mappingproxy references exactly the mapping it wraps; there is no public accessor.
        referents = gc.get_referents(attributes)
        if len(referents) != 1:
            return attributes.get
        inner = referents[0]
        if type(inner) is dict:
            return attributes.get  # a proxy over a dict is as fast as the dict
    backing = getattr(inner, "_dict", None)
    if type(backing) is dict:
        return backing.get
    return attributes.get


def _text(value: Any) -> Optional[str]:
    if value is None:
        return None
    text = value if isinstance(value, str) else str(value)
    return text if text.strip() else None


def _events_named(events: Iterable[Any], name: str) -> Iterable[Mapping[str, Any]]:
    for event in events:
        if getattr(event, "name", None) == name:
            attributes = getattr(event, "attributes", None)
            if attributes:
                yield attributes


_NOT_RECORDED: Final = object()
# The markers content.unwrap_arguments / unwrap_result look for before parsing a text for a wrapper.
_LANGCHAIN_INPUT: Final = content.INPUT_WRAPPER_MARKER
_LANGCHAIN_OUTPUT: Final = content.OUTPUT_WRAPPER_MARKER
# The fast paths of Mapper._arguments_raw / _result_raw read the first source of each list.
assert ARGUMENT_SOURCES[0] == (GENAI_ARGUMENTS, content.unwrap_arguments)
assert RESULT_SOURCES[0] == (GENAI_RESULT, content.unwrap_result)


def _first_recorded(get: Getter, sources: Tuple[Tuple[str, Callable[[Any], Any]], ...]) -> Any:
    for key, unwrap in sources:
        value = get(key)
        if value is not None:
            return unwrap(value)
    return _NOT_RECORDED


# What the other sources a span records its arguments or result in say, when one differs from the
# first: ((attribute, or EVENTS_SOURCE for Strands' span events), value as recorded, wrapper
# removed), ...). None (the common case): no other source, or each is the same text.
Others = Optional[Tuple[Tuple[str, Any], ...]]
EVENTS_SOURCE: Final = "span events"
Sources = Tuple[Tuple[str, Callable[[Any], Any]], ...]
# For each source, the sources after it.
_LATER_ARGUMENT_SOURCES: Final = tuple(ARGUMENT_SOURCES[i + 1:] for i in range(len(ARGUMENT_SOURCES)))
_LATER_RESULT_SOURCES: Final = tuple(RESULT_SOURCES[i + 1:] for i in range(len(RESULT_SOURCES)))
# A span with none of these keys (and no events) records its arguments and its result in one
# source at most each: the common case, told by one C-level test.
_OTHER_ARGUMENT_KEYS: Final = frozenset(k for k, _ in ARGUMENT_SOURCES[1:])
_OTHER_KEYS: Final = _OTHER_ARGUMENT_KEYS | frozenset(k for k, _ in RESULT_SOURCES[1:])


class Mapper:
    """Reads spans by the conventions real instrumentations follow, after the user's own rules.

    ``role()`` says what a span is (``ROLE_TOOL``, ``ROLE_AGENT``, ``ROLE_STEP`` or ``ROLE_OTHER``);
    the other methods read what a tool or agent span recorded. Values come back as recorded (a JSON
    string stays a string) with instrumentation wrappers removed; ``model.decode_content`` decodes.
    """

    __slots__ = ("_rules", "_argument_rules", "_result_rules", "_call_id_rules")

    def __init__(self, rules: Sequence[MappingRule] = ()) -> None:
        self._rules: Tuple[CompiledRule, ...] = compile_rules(rules)
        # (rule, the attribute it names) for the rules that say where arguments / results are
        self._argument_rules = tuple((r, r.arguments) for r in self._rules if r.arguments)
        self._result_rules = tuple((r, r.result) for r in self._rules if r.result)
        self._call_id_rules = tuple(r for r in self._rules if r.call_id)

    # -- recognition --------------------------------------------------------------------------
    @property
    def has_rules(self) -> bool:
        return bool(self._rules)

    def role(self, name: str, attributes: Mapping[str, Any]) -> int:
        if not self._rules:
            if type(attributes) is dict:
                # A GenAI operation name decides first in marked_role: read it first here too.
                marker = attributes.get(OPERATION)
                if type(marker) is str:
                    found = OPERATION_ROLES.get(marker)
                    if found is not None:
                        return found
            if surely_other(name, attributes):
                return ROLE_OTHER  # the common case on an agent's hot path
        return self.marked_role(name, attributes)

    def marked_role(self, name: str, attributes: Mapping[str, Any]) -> int:
        """``role`` without the ``surely_other`` shortcut, for a caller that has just asked it."""
        get = attributes.get if type(attributes) is dict else lookup(attributes)
        if self._rules:
            for rule in self._rules:
                gate = rule.gate_key
                if gate is not None and get(gate) is None:
                    continue
                if rule.matches(name, get):
                    return rule.role
        marker = get(OPERATION)
        if marker is not None and isinstance(marker, str):
            found = OPERATION_ROLES.get(marker)
            if found is not None:
                return found
        marker = get(OI_KIND)
        if marker is not None and isinstance(marker, str):
            found = OPENINFERENCE_ROLES.get(marker)
            if found is not None:
                return found
        marker = get(TL_KIND)
        if marker is not None and isinstance(marker, str):
            found = TRACELOOP_ROLES.get(marker)
            if found is not None:
                return found
        if get(MCP_METHOD) == "tools/call":
            return ROLE_TOOL
        if get(TL_REQUEST_TYPE) in TRACELOOP_REQUEST_TYPES:
            return ROLE_STEP
        # Name markers last; the first-letter and "." guards skip most names cheaply.
        if name[:1] in NAME_INITIALS and name.startswith(NAME_PREFIXES):
            return role_from_name(name)
        if "." in name and name.endswith(NAME_SUFFIXES):
            return role_from_name(name)
        return ROLE_OTHER

    def _rule_for(self, name: str, get: Getter) -> Optional[CompiledRule]:
        for rule in self._rules:
            if rule.matches(name, get):
                return rule
        return None

    # -- tool spans ---------------------------------------------------------------------------
    def tool_name(self, name: str, attributes: Mapping[str, Any]) -> Optional[str]:
        """The called tool's name; None when a tool span does not say (an unreadable call)."""
        return self._tool_name(name, lookup(attributes))

    def tool_start(self, name: str, attributes: Mapping[str, Any]) -> Tuple[Optional[str], Optional[str]]:
        """``(tool_name, call_id)`` of a tool span, read in one pass (the engine's per-call path)."""
        get = attributes.get if type(attributes) is dict else lookup(attributes)
        if not self._rules:
            # The GenAI keys are read first by _tool_name and _call_id: where they hold a name,
            # that is the answer.
            tool = get(GENAI_TOOL_NAME)
            if type(tool) is not str or not tool.strip():
                tool = self._tool_name(name, get)
            call_id = get(GENAI_CALL_ID)
            if call_id is None:
                # What _call_id reads next, when the GenAI key is absent (no user rule names one).
                call_id = get(OI_TOOL_ID)
                if call_id is not None:
                    call_id = _text(call_id)
            elif type(call_id) is not str or not call_id.strip():
                call_id = self._call_id(get)
            return tool, call_id
        return self._tool_name(name, get), self._call_id(get)

    def _tool_name(self, name: str, get: Getter) -> Optional[str]:
        rule = self._rule_for(name, get) if self._rules else None
        if rule is not None:
            readable, found = rule.tool_name_from(name, get)
            if found is not None or not readable:
                return found
        for key in (GENAI_TOOL_NAME, OI_TOOL_NAME, TL_ENTITY_NAME):
            readable, found = name_text(get(key))
            if found is not None or not readable:
                return found  # not text (a list, a number): no name, and no later source names it
        if name.startswith(TOOL_PREFIX):
            return _text(name[len(TOOL_PREFIX) :].strip())
        if name.endswith(".tool"):
            return _text(name[: -len(".tool")])
        if get(MCP_METHOD) == "tools/call" and name.startswith("tools/call "):
            return _text(name[len("tools/call ") :].strip())
        if get(OI_KIND) in ("TOOL", "tool"):
            # OpenInference emitters name tool spans after the function (and set tool.name only
            # at the end, so this is what is known at span start).
            return _text(name)
        return None

    def call_id(self, attributes: Mapping[str, Any]) -> Optional[str]:
        return self._call_id(lookup(attributes))

    def _call_id(self, get: Getter) -> Optional[str]:
        for rule in self._call_id_rules:
            if rule.matches_attributes(get):
                found = _text(get(rule.call_id))  # type: ignore[arg-type]  # set for this rule (checked at load)
                if found is not None:
                    return found
        for key in (GENAI_CALL_ID, OI_TOOL_ID):
            found = _text(get(key))
            if found is not None:
                return found
        return None

    def arguments_raw(self, attributes: Mapping[str, Any], events: Iterable[Any] = ()) -> Any:
        """The call's arguments as recorded (JSON string, structured value or bare string), with
        instrumentation wrappers removed; None when the span did not record them.

        ``tool.parameters`` (OpenInference) is the tool's parameter schema, not the arguments, and
        is never read. User rules are consulted by their attribute conditions only (the span name
        is not passed here); a rule's ``arguments`` attribute is specific enough on its own.
        """
        return self._arguments_raw(lookup(attributes), events)

    def _arguments_raw(self, get: Getter, events: Iterable[Any]) -> Any:
        if not self._argument_rules:
            value = get(GENAI_ARGUMENTS)
            if type(value) is str and _LANGCHAIN_INPUT not in value:
                return value  # what unwrap_arguments returns for a text that holds no wrapper
        return self._recorded(get, events, self._argument_rules, ARGUMENT_SOURCES, self._strands_arguments)

    def result_raw(self, attributes: Mapping[str, Any], events: Iterable[Any] = ()) -> Any:
        """The call's result as recorded, wrappers removed; None when not recorded."""
        return self._result_raw(lookup(attributes), events)

    def _result_raw(self, get: Getter, events: Iterable[Any]) -> Any:
        if not self._result_rules:
            value = get(GENAI_RESULT)
            if type(value) is str and _LANGCHAIN_OUTPUT not in value:
                return value  # what unwrap_result returns for a text that holds no wrapper
        return self._recorded(get, events, self._result_rules, RESULT_SOURCES, self._strands_result)

    @staticmethod
    def _recorded(get: Getter, events: Iterable[Any], rules: Tuple[Tuple[Any, str], ...],
                  sources: Tuple[Tuple[str, Callable[[Any], Any]], ...],
                  from_events: Callable[[Iterable[Any]], Any]) -> Any:
        """A call's arguments or result as recorded: where a user's rule whose attributes match
        says, else the first of the conventions' ``sources`` recorded, else Strands' span events."""
        for rule, key in rules:
            if rule.matches_attributes(get):
                value = get(key)
                if value is not None:
                    return content.plain(value)
        value = _first_recorded(get, sources)
        return from_events(events) if value is _NOT_RECORDED else value

    @staticmethod
    def _strands_arguments(events: Iterable[Any]) -> Any:
        # Strands records a tool's input as a span event, in its legacy or its latest form.
        return Mapper._strands_content(events, EV_TOOL_MESSAGE, "content", GENAI_INPUT_MESSAGES,
                                       "tool_call", "arguments")

    @staticmethod
    def _strands_result(events: Iterable[Any]) -> Any:
        return Mapper._strands_content(events, EV_CHOICE, "message", GENAI_OUTPUT_MESSAGES,
                                       "tool_call_response", "response")

    @staticmethod
    def _strands_content(events: Iterable[Any], legacy_event: str, legacy_key: str, messages_key: str,
                         part: str, field: str) -> Any:
        """A tool's input or output from Strands' span events: the legacy event's attribute, or the
        field of a message part in the latest form's details event."""
        for event in events:
            attributes = getattr(event, "attributes", None)
            if not attributes:
                continue
            event_name = getattr(event, "name", None)
            if event_name == legacy_event:
                value = attributes.get(legacy_key)
                if value is not None:
                    return content.plain(value)
            elif event_name == EV_DETAILS:
                messages = attributes.get(messages_key)
                if messages is not None:
                    value = content.message_part_field(messages, part, field)
                    if value is not None:
                        return content.plain(value)
        return None

    def error_type(self, attributes: Mapping[str, Any], status_code: int, events: Iterable[Any] = ()) -> Optional[str]:
        """Why the operation failed, or None if it did not: ``error.type``, else the type of a
        recorded ``exception`` event, else ``_OTHER`` for a span whose status is ERROR."""
        return self._error_type(lookup(attributes), status_code, events)

    def arguments_read(self, attributes: Mapping[str, Any], events: Sequence[Any] = ()) -> Tuple[Any, Others]:
        """``(arguments_raw, others)``: :meth:`arguments_raw`, and what the other sources the span
        records its arguments in say when one is not the same text (:data:`Others`)."""
        get: Getter
        if type(attributes) is dict:
            if not events and _OTHER_ARGUMENT_KEYS.isdisjoint(attributes):
                return self._arguments_raw(attributes.get, events), None  # one source at most
            get = attributes.get
        else:
            get = lookup(attributes)
        return self._read(attributes, get, events, self._argument_rules, ARGUMENT_SOURCES, _LATER_ARGUMENT_SOURCES,
                          self._strands_arguments, _LANGCHAIN_INPUT)

    def call_end(self, attributes: Mapping[str, Any], events: Sequence[Any], status_code: int,
                 need_args: bool, need_result: bool) -> Tuple[Any, Any, Optional[str], Others, Others]:
        """``(arguments_raw, result_raw, error_type, other arguments, other results)`` of an ending
        tool span, read in one pass; the arguments and result (and their other sources, see
        :meth:`arguments_read`) only when asked for (None otherwise)."""
        get: Getter
        if type(attributes) is dict:
            get = attributes.get
            if not events and _OTHER_KEYS.isdisjoint(attributes):
                # One source at most of each (the common case): what _read would return.
                return (self._arguments_raw(get, events) if need_args else None,
                        self._result_raw(get, events) if need_result else None,
                        self._error_type(get, status_code, events), None, None)
        else:
            get = lookup(attributes)
        args: Any = None
        args_others: Others = None
        result: Any = None
        result_others: Others = None
        if need_args:
            args, args_others = self._read(attributes, get, events, self._argument_rules, ARGUMENT_SOURCES,
                                           _LATER_ARGUMENT_SOURCES, self._strands_arguments, _LANGCHAIN_INPUT)
        if need_result:
            result, result_others = self._read(attributes, get, events, self._result_rules, RESULT_SOURCES,
                                               _LATER_RESULT_SOURCES, self._strands_result, _LANGCHAIN_OUTPUT)
        return args, result, self._error_type(get, status_code, events), args_others, result_others

    @staticmethod
    def _read(attributes: Mapping[str, Any], get: Getter, events: Sequence[Any], rules: Tuple[Tuple[Any, str], ...],
              sources: Sources, later: Tuple[Sources, ...], from_events: Callable[[Sequence[Any]], Any],
              marker: str) -> Tuple[Any, Others]:
        """:meth:`_recorded`, and what the sources after the one read (``later``: for each source,
        the sources after it) and Strands' span events say when the span records the content there
        too and it is not the same text (``ToolCall`` compares what they decode to; the same text
        is the same content, whatever another convention's wrapper would make of it). A user's rule
        that says where the content is decides alone: the user named the attribute that holds it."""
        first: Any = _NOT_RECORDED
        at = 0
        if not rules:
            value = get(sources[0][0])
            if type(value) is str and marker not in value:
                first = value  # what the first source's unwrap returns for a text that holds no wrapper
        else:
            for rule, key in rules:
                if rule.matches_attributes(get):
                    value = get(key)
                    if value is not None:
                        return content.plain(value), None
        if first is _NOT_RECORDED:
            for key, unwrap in sources:
                value = get(key)
                if value is not None:
                    first = unwrap(value)
                    break
                at += 1
            else:
                return from_events(events), None
        found: Others = None
        plain_dict = type(attributes) is dict
        for key, unwrap in later[at]:
            if plain_dict and key not in attributes:
                continue  # absent: no call
            value = get(key)
            if value is None or value is first or (type(value) is str and value == first):
                continue
            value = unwrap(value)
            if value is not None and value is not first and not (type(value) is str and value == first):
                found = (found or ()) + ((key, value),)
        if events:
            value = from_events(events)
            if value is not None and value is not first and not (type(value) is str and value == first):
                found = (found or ()) + ((EVENTS_SOURCE, value),)
        return first, found

    def _error_type(self, get: Getter, status_code: int, events: Iterable[Any]) -> Optional[str]:
        declared = get(ERROR_TYPE)
        if declared is not None:
            declared = _text(declared)
            if declared is not None:
                return declared
        if events:
            for event_attributes in _events_named(events, EV_EXCEPTION):
                found = _text(event_attributes.get("exception.type"))
                if found is not None:
                    return found
        if status_code == STATUS_ERROR:
            return ERROR_OTHER
        # Strands reports a tool that returned an error result by status, not by exception.
        if get(STRANDS_TOOL_STATUS) == "error":
            return ERROR_OTHER
        return None

    # -- tool definitions -------------------------------------------------------------------------
    def tool_definitions(self, attributes: Mapping[str, Any]) -> Optional[Dict[str, Tuple[str, ...]]]:
        """``{tool: parameter names}`` from the tool definitions a span recorded (a model step or an
        agent that offered tools): ``gen_ai.tool.definitions``, OpenInference's flattened
        ``llm.tools.<i>.tool.json_schema``. None when it recorded none."""
        get = attributes.get if type(attributes) is dict else lookup(attributes)  # every model step's end
        found: Optional[Dict[str, Tuple[str, ...]]] = None
        value = get(GENAI_TOOL_DEFINITIONS)
        if value is not None:
            found = content.tool_definitions(value)
        if get(OI_KIND) is not None:
            listed = []
            for key, value in attributes.items():
                if key.startswith(OI_LLM_TOOLS_PREFIX) and key.endswith(OI_LLM_TOOLS_SUFFIX):
                    listed.append(value)
                    if len(listed) >= content.MAX_DEFINITIONS:
                        break
            if listed:
                found = dict(found or {})
                found.update(content.tool_definitions(listed))
        return found or None

    def declared_parameters(self, tool: str, attributes: Mapping[str, Any]) -> Optional[Tuple[str, ...]]:
        """The parameter names a tool span records for its own tool (its definition in
        ``gen_ai.tool.definitions``, OpenInference ``tool.json_schema`` / ``tool.parameters``), or
        None when it records none."""
        get = lookup(attributes)
        definitions = self.tool_definitions(attributes)
        if definitions and tool in definitions:
            return definitions[tool]
        value = get(OI_TOOL_JSON_SCHEMA)
        if value is not None:
            defined = content.tool_definitions(value)
            found = defined.get(tool)
            if found is None and len(defined) == 1:
                found = next(iter(defined.values()))  # the span's own tool, under another name
            if found is None:
                found = content.schema_parameters(content.parse_json(value))
            if found is not None:
                return found
        value = get(OI_TOOL_PARAMETERS)
        if value is not None:
            return content.declared_parameters(value)
        return None

    # -- agent spans --------------------------------------------------------------------------
    def agent_name(self, name: str, attributes: Mapping[str, Any]) -> Optional[str]:
        return self.agent_name_read(name, attributes)[1]

    def agent_name_read(self, name: str, attributes: Mapping[str, Any]) -> Tuple[bool, Optional[str]]:
        """``(readable, agent name)``: an agent name attribute that is not text (a list, a number:
        :func:`name_text`) is no name, and no later source (the span name) names the agent."""
        get = lookup(attributes)
        rule = self._rule_for(name, get) if self._rules else None
        if rule is not None and rule.agent_name:
            readable, found = name_text(get(rule.agent_name))
            if found is not None or not readable:
                return readable, found
        for key in (GENAI_AGENT_NAME, OI_AGENT_NAME):
            readable, found = name_text(get(key))
            if found is not None or not readable:
                return readable, found
        traceloop_kind = get(TL_KIND)
        if traceloop_kind in ("agent", "workflow"):
            readable, found = name_text(get(TL_ENTITY_NAME))
            if found is None and readable and traceloop_kind == "workflow":
                # Only the workflow span's own name: Traceloop stamps it on every span inside.
                readable, found = name_text(get(TL_WORKFLOW_NAME))
            if found is not None or not readable:
                return readable, found
        for key in (GENAI_WORKFLOW_NAME, PYD2_AGENT_NAME):
            readable, found = name_text(get(key))
            if found is not None or not readable:
                return readable, found
        for prefix in AGENT_PREFIXES:
            if name.startswith(prefix):
                return True, _text(name[len(prefix) :].strip())
        if get(OI_KIND) in ("AGENT", "agent"):
            # OpenInference emitters (e.g. openai-agents) name agent spans after the agent.
            return True, _text(name)
        for suffix in (".agent", ".workflow"):
            if name.endswith(suffix):
                return True, _text(name[: -len(suffix)])
        return True, None

    def user_prompts(self, attributes: Mapping[str, Any]) -> List[str]:
        """The user messages a span recorded (``gen_ai.input.messages``; OpenInference's
        ``input.value`` as text): what an Assay test's ``input.prompt`` names."""
        get = lookup(attributes)
        value = get(GENAI_INPUT_MESSAGES)
        if value is not None:
            return content.user_texts(value)
        value = get(OI_INPUT)
        text = content.as_text(value) if value is not None else None
        return [text] if text else []

    @staticmethod
    def embeddings(attributes: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
        """The precomputed embeddings a span carries (``assay.embeddings.*``), raw; None when it has none."""
        get = lookup(attributes)
        found = {k: get(k) for k in (EMB_RESPONSE, EMB_REFERENCE, EMB_SOURCE_REFERENCE, EMB_MODEL)}
        return {k: v for k, v in found.items() if v is not None} or None

    def final_output(self, attributes: Mapping[str, Any], events: Iterable[Any] = ()) -> Optional[str]:
        """The agent's final answer text, or None when the span did not record it."""
        get = lookup(attributes)
        value = get(GENAI_OUTPUT_MESSAGES)
        if value is not None:
            text = content.assistant_text(value)
            if text is not None:
                return text
        value = get(OI_OUTPUT)
        if value is not None:
            return content.as_text(value)
        value = get(TL_ENTITY_OUTPUT)
        if value is not None:
            return content.entity_output_text(value)
        value = get(PYD_FINAL_RESULT)
        if value is not None:
            return content.as_text(value)
        return self._answer_from_events(events)

    @staticmethod
    def _answer_from_events(events: Iterable[Any]) -> Optional[str]:
        # Strands puts the agent's answer in a span event; the last one is the final answer.
        answer: Optional[str] = None
        for event in events:
            attributes = getattr(event, "attributes", None)
            if not attributes:
                continue
            event_name = getattr(event, "name", None)
            if event_name == EV_DETAILS:
                messages = attributes.get(GENAI_OUTPUT_MESSAGES)
                if messages is not None:
                    text = content.assistant_text(messages)
                    if text is not None:
                        answer = text
            elif event_name == EV_CHOICE:
                message = attributes.get("message")
                if message is not None:
                    answer = content.as_text(message)
        return answer

    # -- episodes -----------------------------------------------------------------------------
    def conversation_key(self, attributes: Mapping[str, Any], key: str) -> Optional[str]:
        """The value of the episode key attribute; ``gen_ai.conversation.id`` also accepts the
        session ids OpenInference, Traceloop and MCP (``mcp.session.id``) record."""
        get = lookup(attributes)
        found = _text(get(key))
        if found is not None or key != GENAI_CONVERSATION:
            return found
        for fallback in (OI_SESSION, TL_SESSION, MCP_SESSION):
            found = _text(get(fallback))
            if found is not None:
                return found
        return None
