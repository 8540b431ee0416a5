"""Reading recorded tool arguments, results and answers out of the shapes instrumentations write.

Values are returned *as recorded*: a JSON string stays a string (``model.decode_content`` parses it
later, lazily), a structured attribute stays structured. Only wrappers that an instrumentation puts
around the real value are removed, which sometimes means parsing the string to look inside.
Structured values are normalised to plain ``dict``/``list`` (the SDK hands out tuples and read-only
mappings, the OTLP file readers lists and dicts), so live and offline runs see equal values.
"""
from __future__ import annotations

import ast
import json
from typing import Any, Dict, Final, Iterable, List, Mapping, Optional, Tuple

# Keys of the wrapper the Traceloop LangChain callback writes around a tool's input / output.
_LANGCHAIN_INPUT_KEYS: Final = frozenset(("input_str", "tags", "metadata", "inputs", "kwargs"))
_LANGCHAIN_OUTPUT_KEYS: Final = frozenset(("output", "kwargs"))
# Traceloop decorators record a call's input as {"args": [...], "kwargs": {...}}.
_DECORATOR_INPUT_KEYS: Final = frozenset(("args", "kwargs"))
# A Python literal nested deeper than this is left as text (ast has recursion limits).
_MAX_LITERAL_BRACKETS: Final = 200
_MAX_LITERAL_CHARS: Final = 1_000_000


def plain(value: Any) -> Any:
    """The value with tuples turned into lists and mappings into dicts, recursively."""
    if value is None or isinstance(value, (str, bytes, bool, int, float)):
        return value
    try:
        return _plain(value)
    except RecursionError:  # absurdly deep input: leave it as recorded
        return value


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def parse_json(value: Any) -> Any:
    """A JSON string parsed, a structured value as plain data; None if it is neither."""
    if isinstance(value, (bytes, bytearray)):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return None
    if isinstance(value, str):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return None
    if isinstance(value, (list, tuple, Mapping)):
        return plain(value)
    return None


def _looks_like(value: Any, marker: str) -> bool:
    """Cheap pre-check before parsing a string to look for a wrapper."""
    if isinstance(value, str):
        return value.lstrip().startswith("{") and marker in value
    return isinstance(value, Mapping)


def _python_literal(text: str) -> Any:
    """LangChain's ``input_str`` is ``str(tool_input)``: a Python repr, not JSON, for dict inputs."""
    s = text.strip()
    if not s or s[0] not in "{[" or len(s) > _MAX_LITERAL_CHARS:
        return None
    if s.count("{") + s.count("[") > _MAX_LITERAL_BRACKETS:
        return None
    try:
        value = ast.literal_eval(s)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return plain(value) if isinstance(value, (dict, list, tuple)) else None


def _langchain_input(wrapper: Mapping[str, Any]) -> Any:
    inputs = wrapper.get("inputs")
    if inputs is not None:
        return plain(inputs)
    input_str = wrapper.get("input_str")
    if isinstance(input_str, str):
        try:
            json.loads(input_str)
            return input_str  # JSON text: decoded later like any recorded string
        except (ValueError, RecursionError):
            pass
        literal = _python_literal(input_str)
        return literal if literal is not None else input_str
    return plain(input_str)


def _langchain_message_content(output: Any) -> Any:
    """A LangChain message serialised with ``to_json()`` → its ``content``; anything else as is."""
    if isinstance(output, Mapping) and output.get("type") == "constructor" and "lc" in output:
        ident = output.get("id")
        kwargs = output.get("kwargs")
        if isinstance(ident, (list, tuple)) and ident and str(ident[-1]).endswith("Message") \
                and isinstance(kwargs, Mapping) and "content" in kwargs:
            return plain(kwargs["content"])
    return plain(output)


# What a text must hold to be parsed for the LangChain wrapper (Mapper reads texts without it
# directly: a text without the marker is returned as recorded).
INPUT_WRAPPER_MARKER: Final = '"input_str"'
OUTPUT_WRAPPER_MARKER: Final = '"output"'


def unwrap_arguments(value: Any) -> Any:
    """``gen_ai.tool.call.arguments``: as recorded, except the Traceloop LangChain wrapper."""
    if not _looks_like(value, INPUT_WRAPPER_MARKER):
        return plain(value)
    parsed = value if isinstance(value, Mapping) else parse_json(value)
    if isinstance(parsed, Mapping) and "input_str" in parsed and _LANGCHAIN_INPUT_KEYS.issuperset(parsed):
        return _langchain_input(parsed)
    return plain(value)


def unwrap_result(value: Any) -> Any:
    """``gen_ai.tool.call.result`` / ``traceloop.entity.output``: the LangChain ``{"output", "kwargs"}``
    wrapper is removed (and a serialised ToolMessage reduced to its content)."""
    if not _looks_like(value, OUTPUT_WRAPPER_MARKER):
        return plain(value)
    parsed = value if isinstance(value, Mapping) else parse_json(value)
    if isinstance(parsed, Mapping) and "output" in parsed and _LANGCHAIN_OUTPUT_KEYS.issuperset(parsed):
        return _langchain_message_content(parsed["output"])
    return plain(value)


def unwrap_entity_input(value: Any) -> Any:
    """``traceloop.entity.input``: ``{"args": [...], "kwargs": {...}}`` → the keyword arguments, or
    the single positional dict, or ``{"args": [...], **kwargs}``; the LangChain wrapper → ``inputs``.
    A value that is neither (or does not parse) is returned as recorded."""
    parsed = parse_json(value)
    if not isinstance(parsed, Mapping) or not parsed:
        return plain(value)
    if "input_str" in parsed and _LANGCHAIN_INPUT_KEYS.issuperset(parsed):
        return _langchain_input(parsed)
    if not _DECORATOR_INPUT_KEYS.issuperset(parsed):
        return plain(value)
    args = parsed.get("args") or []
    kwargs = parsed.get("kwargs") or {}
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        return plain(value)
    if not args:
        return kwargs
    if len(args) == 1 and isinstance(args[0], dict) and not kwargs:
        return args[0]
    merged = {"args": args}
    merged.update(kwargs)
    return merged


# -- messages (GenAI ``{role, parts[]}`` lists, as attributes or event attributes) ----------------


def _messages(value: Any) -> Optional[List[Any]]:
    parsed = parse_json(value)
    if isinstance(parsed, dict):
        parsed = [parsed]
    return parsed if isinstance(parsed, list) else None


def _parts(message: Any) -> Iterable[Mapping[str, Any]]:
    if not isinstance(message, Mapping):
        return ()
    parts = message.get("parts")
    if isinstance(parts, list):
        return [p for p in parts if isinstance(p, Mapping)]
    return ()


def message_part_field(value: Any, part_type: str, field: str) -> Any:
    """The ``field`` of the first part of type ``part_type`` in a messages value; None if none."""
    messages = _messages(value)
    if not messages:
        return None
    for message in messages:
        for part in _parts(message):
            if part.get("type") == part_type and field in part:
                return part[field]
    return None


def assistant_text(value: Any) -> Optional[str]:
    """The text of the last assistant message (text parts joined), or None if it has none."""
    messages = _messages(value)
    if not messages:
        return None
    chosen = None
    for message in messages[::-1]:  # (not reversed(): a mypyc internal error on List[Any])
        if isinstance(message, Mapping) and message.get("role") in ("assistant", None):
            chosen = message
            break
    if chosen is None:
        return None
    texts = []
    for part in _parts(chosen):
        if part.get("type") == "text":
            content = part.get("content", part.get("text"))
            if isinstance(content, str):
                texts.append(content)
    if texts:
        return "".join(texts)
    content = chosen.get("content")  # older {role, content} message shape
    return content if isinstance(content, str) else None


def user_texts(value: Any) -> List[str]:
    """The text of every user message in a messages value (text parts joined per message)."""
    messages = _messages(value)
    out: List[str] = []
    for message in messages or ():
        if not isinstance(message, Mapping) or message.get("role") != "user":
            continue
        texts = [p.get("content", p.get("text")) for p in _parts(message) if p.get("type") == "text"]
        joined = "".join(t for t in texts if isinstance(t, str))
        if not texts and isinstance(message.get("content"), str):  # older {role, content} shape
            joined = message["content"]
        if joined:
            out.append(joined)
    return out


def as_text(value: Any) -> Optional[str]:
    """A recorded answer as text: strings as they are, structured values as compact JSON."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return json.dumps(plain(value), sort_keys=True, default=str)


def entity_output_text(value: Any) -> Optional[str]:
    """``traceloop.entity.output`` (JSON of the return value) as answer text: a JSON string is
    unquoted; LangChain's ``{"output"}`` / ``{"outputs"}`` wrappers are removed."""
    parsed = parse_json(value)
    if parsed is None:
        return as_text(value)
    if isinstance(parsed, str):
        return parsed
    if isinstance(parsed, dict) and "kwargs" in parsed and len(parsed) == 2:
        for key in ("output", "outputs"):
            if key in parsed:
                inner = _langchain_message_content(parsed[key])
                return inner if isinstance(inner, str) else as_text(inner)
    return as_text(value)


# -- tool definitions (which parameters a tool takes) ---------------------------------------------
# Bounds: definitions are read from hostile spans.
MAX_DEFINITION_CHARS: Final = 256 * 1024  # a definitions value longer than this is not parsed
MAX_DEFINITIONS: Final = 128  # tools read from one value
# JSON Schema keywords: a `tool.parameters` object holding one of these is a schema, not a map of
# parameter name -> type.
_SCHEMA_WORDS: Final = frozenset(("type", "properties", "$schema", "required", "additionalProperties", "$ref",
                           "anyOf", "oneOf", "allOf", "$defs", "definitions", "title", "description"))


def _parsed(value: Any) -> Any:
    if isinstance(value, (str, bytes, bytearray)) and len(value) > MAX_DEFINITION_CHARS:
        return None
    return parse_json(value)


def schema_parameters(schema: Any) -> Optional[Tuple[str, ...]]:
    """The parameter names a tool's parameter schema declares: the keys of its ``properties``; ``()``
    for an object schema without properties; None when it is not a schema of named parameters."""
    if not isinstance(schema, dict):  # parsed JSON and ``plain`` values: plain dicts
        return None
    properties = schema.get("properties")
    if isinstance(properties, dict):
        return tuple(str(k) for k in properties)
    if schema.get("type") == "object" or not schema:
        return ()
    return None


def _definition(item: Any) -> Optional[Tuple[str, Optional[Tuple[str, ...]]]]:
    """``(tool name, parameter names)`` of one parsed definition, in the shapes instrumentations
    record: ``{"type": "function", "name", "parameters"}`` (OTel GenAI), OpenAI's ``{"type":
    "function", "function": {"name", "parameters"}}`` (OpenInference ``llm.tools``), Anthropic's and
    MCP's ``{"name", "input_schema" | "inputSchema"}``."""
    if not isinstance(item, dict):
        return None
    inner = item.get("function")
    source = inner if isinstance(inner, dict) else item
    name = source.get("name")
    if not isinstance(name, str) or not name:
        return None
    for key in ("parameters", "input_schema", "inputSchema", "json_schema"):
        if key in source:
            schema = source[key]
            return name, schema_parameters(_parsed(schema) if isinstance(schema, str) else schema)
    return name, None


# Model steps repeat the same definitions (the same JSON texts) at every turn: parse each text once.
_DEFINITIONS_CACHE: Dict[str, Dict[str, Tuple[str, ...]]] = {}
_DEFINITIONS_CACHE_SIZE: Final = 1024
_CACHED_DEFINITION_CHARS: Final = 16 * 1024  # at most 16 MiB of cached text


def tool_definitions(value: Any) -> Dict[str, Tuple[str, ...]]:
    """``{tool name: parameter names}`` from a recorded list of tool definitions (a JSON string, a
    structured list, a list of JSON strings, or one definition). Tools whose parameters the
    definition does not show are left out. The result is shared: do not change it."""
    if type(value) is str and len(value) <= _CACHED_DEFINITION_CHARS:
        found = _DEFINITIONS_CACHE.get(value)
        if found is None:
            found = _tool_definitions(value)
            if len(_DEFINITIONS_CACHE) >= _DEFINITIONS_CACHE_SIZE:
                _DEFINITIONS_CACHE.clear()  # bounded; hostile spans only cost re-parsing
            _DEFINITIONS_CACHE[value] = found
        return found
    return _tool_definitions(value)


def _tool_definitions(value: Any) -> Dict[str, Tuple[str, ...]]:
    if isinstance(value, (str, bytes, bytearray)):
        parsed = _parsed(value)
    elif isinstance(value, (list, tuple)):
        parsed = list(value)  # items are made plain one by one, below
    else:
        parsed = plain(value)
    if isinstance(parsed, dict):
        parsed = [parsed]
    out: Dict[str, Tuple[str, ...]] = {}
    if not isinstance(parsed, list):
        return out
    for item in parsed[:MAX_DEFINITIONS]:
        if type(item) is str:
            out.update(tool_definitions(item))  # one definition per text (a list of JSON strings)
            continue
        found = _definition(item if type(item) is dict else plain(item))
        if found is not None and found[1] is not None:
            out[found[0]] = found[1]
    return out


def declared_parameters(value: Any) -> Optional[Tuple[str, ...]]:
    """OpenInference ``tool.parameters`` on a tool span: a parameter schema, or a simple map of
    parameter name -> type (``{"order_id": "str"}``). None when it is neither."""
    parsed = _parsed(value)
    if not isinstance(parsed, dict):
        return None
    if not _SCHEMA_WORDS.isdisjoint(parsed):
        return schema_parameters(parsed)
    if len(parsed) <= MAX_DEFINITIONS and all(isinstance(v, (str, dict)) for v in parsed.values()):
        return tuple(str(k) for k in parsed)
    return None
