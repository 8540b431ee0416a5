"""The structure of a rules file, declared once.

The loader checks the file against these :class:`Field` tables (plus each assertion type's own
``fields``), and ``spanassert schema`` turns the same declarations into a JSON Schema (draft 2020-12)
that editors can use through yaml-language-server. One declaration, two uses, no drift.
"""
from __future__ import annotations

import copy
import json
from typing import Any, Dict, List, Mapping, Optional, Type

from ..assertions.base import COMMON_FIELDS, Assertion, Field
from ..assertions.registry import ASSERTION_TYPES, EXPECTED_TYPES
from ..core.durations import DURATION_PATTERN
from ..core.model import MISSING

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

SCALAR: Dict[str, Any] = {"type": ["string", "number", "boolean"]}
MAX_TEST_ID = 200  # characters
NON_EMPTY_STRING: Dict[str, Any] = {"type": "string", "minLength": 1}
POSITIVE_INT: Dict[str, Any] = {"type": "integer", "minimum": 1}
ONE_OR_MORE_NAMES: Dict[str, Any] = {
    "anyOf": [NON_EMPTY_STRING, {"type": "array", "items": NON_EMPTY_STRING, "minItems": 1}]
}

# Keys that hold no checks of their own and may carry anything: the loader skips them.
EXTENSION_PREFIXES = ("x-", "_")


def _ref(name: str) -> Dict[str, Any]:
    return {"$ref": f"#/$defs/{name}"}


_IGNORED = "Accepted for Assay compatibility; spanassert ignores it."

TOP_FIELDS: Dict[str, Field] = {
    "version": Field({"type": "integer", "const": 1}, doc="Format version; must be 1."),
    "configVersion": Field({"type": "integer", "const": 1}, doc="Assay's spelling of `version`."),
    "suite": Field({"type": "string"}, doc="A name for this set of tests."),
    "model": Field({"type": "string"}, doc=_IGNORED),
    "settings": Field(_ref("settings"), doc="Execution settings."),
    "episodes": Field(_ref("episodes"), doc="How spans are grouped into episodes, and memory bounds."),
    "mappings": Field({"type": "array", "items": _ref("mapping")},
                      doc="Extra ways to recognise tool, agent and step spans."),
    "tests": Field({"type": "array", "minItems": 1, "items": _ref("test")}, required=True,
                   doc="The tests; each holds `expected:` and/or `assertions:`."),
    "thresholds": Field({}, doc=_IGNORED),
    "otel": Field({}, doc=_IGNORED),
    "definitions": Field({}, doc="A place for YAML anchors (`&name`) used further down; not read (Assay exempts "
                                 "it from its unknown-key check too)."),
}

ASSAY_SETTINGS = ("parallel", "timeout_seconds", "cache", "seed", "judge", "thresholding", "on_error",
                  "bail_on_first_failure")

SETTINGS_FIELDS: Dict[str, Field] = {
    **{name: Field({}, doc=_IGNORED) for name in ASSAY_SETTINGS},
    "embedder": Field(
        {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_.]*$"},
        doc="`module:function` returning an embedding vector for a text; imported at load "
            "(needed by `semantic_similarity_to`).",
    ),
    "evidence_key_env": Field(
        {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_]*$"},
        doc="Name of an environment variable holding the key for hashed evidence.",
    ),
    "max_match_chars": Field(POSITIVE_INT, doc="Recorded text longer than this is cut before a rule regex runs."),
    "guard": Field(_ref("guard"), doc="How a guard (`Guard`, `processor.guard()`) decides calls before they run."),
}

GUARD_FIELDS: Dict[str, Field] = {
    "fail_open": Field({"type": "boolean"}, default=True,
                       doc="On an internal error, allow the call (`true`, the default) or block it (`false`); "
                           "counted either way."),
}

EPISODE_FIELDS: Dict[str, Field] = {
    "key": Field(NON_EMPTY_STRING, default="trace",
                 doc="`trace`, or an attribute naming the episode such as `gen_ai.conversation.id`."),
    "idle_timeout": Field(
        {"anyOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "string", "pattern": DURATION_PATTERN}]},
        doc="Seconds without a span before an open episode closes (a number, or `500ms`, `30s`, `5m`, `1h`).",
    ),
    "max_open": Field(POSITIVE_INT, doc="Open episodes kept; the oldest is evicted beyond this."),
    "max_calls_per_episode": Field(POSITIVE_INT, doc="Calls kept per episode; more are counted as overflow."),
    "max_argument_bytes": Field(POSITIVE_INT, doc="Bytes of recorded arguments/results kept per call."),
    "late_window": Field(POSITIVE_INT, doc="Recently closed episodes remembered for late spans (default 2000)."),
}

WHEN_SPECIAL_KEYS = ("span_name", "span_name_prefix", "span_name_suffix")
MAPPING_ROLES = ("tool", "agent", "step")

MAPPING_FIELDS: Dict[str, Field] = {
    "when": Field(
        {
            "type": "object",
            "minProperties": 1,
            "properties": {k: {"type": "string"} for k in WHEN_SPECIAL_KEYS},
            "additionalProperties": SCALAR,
        },
        required=True,
        doc="Conditions on the span: `{attribute: value}` equality, `span_name`, `span_name_prefix`, "
            "`span_name_suffix`.",
    ),
    "role": Field({"enum": list(MAPPING_ROLES)}, default="tool", doc="What a matching span is."),
    "tool_name": Field(NON_EMPTY_STRING, doc="Attribute carrying the tool name."),
    "tool_name_from_span": Field({"type": "boolean"}, default=False, doc="Use the span name as the tool name."),
    "arguments": Field(NON_EMPTY_STRING, doc="Attribute carrying the call arguments."),
    "result": Field(NON_EMPTY_STRING, doc="Attribute carrying the call result."),
    "agent_name": Field(NON_EMPTY_STRING, doc="Attribute carrying the agent name."),
    "call_id": Field(NON_EMPTY_STRING, doc="Attribute carrying the tool call id."),
}

MATCH_FIELDS: Dict[str, Field] = {
    "agent": Field(ONE_OR_MORE_NAMES, doc="Agent name(s) the episode must belong to."),
    "service": Field(ONE_OR_MORE_NAMES, doc="`service.name`(s) the episode must come from."),
    "attributes": Field({"type": "object", "additionalProperties": SCALAR},
                        doc="Attributes of the episode root that must equal these values."),
}

SEVERITIES = ("critical", "error", "warning", "info")
MODES = ("enforce", "shadow")
ACTIONS = ("alert", "block")
ON_ERROR = ("block", "allow")

INPUT_SCHEMA: Dict[str, Any] = {
    "anyOf": [
        {"type": "string"},
        {
            "type": "object",
            # `context`: the seed documents a string; Assay's runtime reads a list of strings
            # (TestInput.context: Option<Vec<String>>). Both are accepted; nothing reads it.
            "properties": {"prompt": {"type": "string"},
                           "context": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}},
                                                 {"type": "null"}]}},
            "required": ["prompt"],
            "additionalProperties": False,
        },
    ]
}

TEST_FIELDS: Dict[str, Field] = {
    # Bounded: every message about a test names it (a 5,000-character id made 5,500-character lines).
    "id": Field({"type": "string", "minLength": 1, "maxLength": MAX_TEST_ID}, required=True,
                doc="Unique name of the test."),
    "match": Field(_ref("match"), doc="Which episodes the test applies to (default: all)."),
    "severity": Field({"enum": list(SEVERITIES)}, default="error", doc="Severity of a violation."),
    "mode": Field({"enum": list(MODES)}, default="enforce",
                  doc="`shadow` reports violations without counting them as failures."),
    "action": Field({"enum": list(ACTIONS)}, default="alert",
                    doc="`alert` (report a violation) or `block`: a guard refuses a call that breaks this test "
                        "before it runs (in `mode: shadow`, it logs what it would have blocked)."),
    "input": Field(INPUT_SCHEMA, doc="The prompt (Assay); a string or `{prompt, context}` (`context`: a string or "
                                     "a list of strings)."),
    "expected": Field(_ref("expected"), doc="Exactly one check of the episode's outcome."),
    "assertions": Field({"type": "array", "items": _ref("assertion")}, doc="Checks of the tool calls."),
    "tags": Field({"type": "array", "items": {"type": "string"}}, doc="Labels for selecting tests."),
    "metadata": Field({"type": "object"}, doc="Free-form data carried into reports."),
    "on_error": Field({"enum": list(ON_ERROR)}, doc=_IGNORED),
}

# `expected:` written without `type:` (Assay's legacy forms): the only key -> the type it builds.
LEGACY_EXPECTED = {"must_contain": "must_contain", "sequence": "sequence_valid", "schema": "args_valid"}
EXPECTED_TYPE_ALIASES = {"sequence": "sequence_valid"}


def has_ref(schema: Any) -> bool:
    """True when a field's schema points into ``$defs`` (a structure the loader walks itself)."""
    return "$ref" in json.dumps(schema, default=str)


# -- JSON Schema export ---------------------------------------------------------------------------
def _property(field: Field) -> Dict[str, Any]:
    prop = copy.deepcopy(field.schema)
    if field.doc and "description" not in prop:
        prop["description"] = field.doc
    if field.default is not MISSING and field.default is not None and "default" not in prop:
        try:
            json.dumps(field.default)
            prop["default"] = copy.deepcopy(field.default)
        except (TypeError, ValueError):
            pass
    return prop


def object_schema(fields: Mapping[str, Field], *, extension_keys: bool = False,
                  extra: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    schema: Dict[str, Any] = {
        "type": "object",
        "properties": {name: _property(f) for name, f in fields.items()},
        "additionalProperties": False,
    }
    required = [name for name, f in fields.items() if f.required]
    if required:
        schema["required"] = required
    if extension_keys:
        schema["patternProperties"] = {"^(x-|_)": {}}
    if extra:
        schema.update(extra)
    return schema


def type_schema(cls: Type[Assertion], type_name: Optional[str] = None) -> Dict[str, Any]:
    """One assertion (or expected) type: `type` pinned, its fields, the common fields, nothing else."""
    name = type_name or cls.type_name
    fields: Dict[str, Field] = {**COMMON_FIELDS, **cls.fields}
    schema = object_schema(fields)
    schema["properties"] = {"type": {"const": name}, **schema["properties"]}
    schema["required"] = ["type"] + [n for n, f in fields.items() if f.required]
    if "tool_pattern" in fields:
        # `tool` (an exact name) or `tool_pattern` (a regex): one of them, or (optional) at most one.
        one = [{"required": ["tool"]}, {"required": ["tool_pattern"]}]
        schema.update({"oneOf": one} if getattr(cls, "tool_required", False)
                      else {"not": {"required": ["tool", "tool_pattern"]}})
    if cls.doc:
        schema["description"] = cls.doc
    return schema


_NOTHING: List[Any] = [False]  # a oneOf/anyOf no value satisfies (no type is registered)


def _one_of(defs: Dict[str, Any], prefix: str, registry: Mapping[str, Type[Assertion]],
            aliases: Mapping[str, str]) -> List[Dict[str, Any]]:
    branches: List[Dict[str, Any]] = []
    for name in sorted(registry):
        defs[f"{prefix}.{name}"] = type_schema(registry[name])
        branches.append(_ref(f"{prefix}.{name}"))
    for alias, target in sorted(aliases.items()):
        if target in registry:
            defs[f"{prefix}.{alias}"] = type_schema(registry[target], alias)
            branches.append(_ref(f"{prefix}.{alias}"))
    return branches


def build_schema() -> Dict[str, Any]:
    """The JSON Schema of a rules file, from the registries as they are now."""
    from .. import assertions  # noqa: F401 - registers the assertion types

    defs: Dict[str, Any] = {}
    defs["settings"] = object_schema(SETTINGS_FIELDS, extension_keys=True)
    defs["guard"] = object_schema(GUARD_FIELDS)
    defs["episodes"] = object_schema(EPISODE_FIELDS)
    defs["mapping"] = object_schema(MAPPING_FIELDS, extra={
        # A tool mapping must say where the tool name comes from.
        "if": {"properties": {"role": {"const": "tool"}}},
        "then": {"anyOf": [
            {"required": ["tool_name"]},
            {"required": ["tool_name_from_span"], "properties": {"tool_name_from_span": {"const": True}}},
        ]},
    })
    defs["match"] = object_schema(MATCH_FIELDS)
    defs["test"] = object_schema(TEST_FIELDS)

    assertion_branches = _one_of(defs, "assertion", ASSERTION_TYPES, {})
    defs["assertion"] = {
        "type": "object",
        "required": ["type"],
        "properties": {"type": {"enum": sorted(ASSERTION_TYPES)} if ASSERTION_TYPES else False},
        "oneOf": assertion_branches or _NOTHING,
    }

    expected_branches = _one_of(defs, "expected", EXPECTED_TYPES, EXPECTED_TYPE_ALIASES)
    legacy = {
        "must_contain": {"anyOf": [{"type": "string", "minLength": 1},
                                   {"type": "array", "items": {"type": "string"}, "minItems": 1}]},
        "sequence": {"type": "array", "items": {"type": "string"}},
        "schema": {"type": ["object", "boolean"]},
    }
    for key, value_schema in legacy.items():
        if LEGACY_EXPECTED[key] in EXPECTED_TYPES:
            defs[f"expected.legacy.{key}"] = {
                "type": "object",
                "properties": {key: value_schema},
                "required": [key],
                "additionalProperties": False,
                "description": f"Assay legacy form of `type: {LEGACY_EXPECTED[key]}`.",
            }
            expected_branches.append(_ref(f"expected.legacy.{key}"))
    defs["expected_check"] = {"anyOf": expected_branches or _NOTHING}
    defs["expected"] = {
        "anyOf": [
            _ref("expected_check"),
            {"type": "array", "items": _ref("expected_check"), "minItems": 1, "maxItems": 1},
        ],
        "description": "Exactly one check (a one-entry list is accepted for Assay compatibility).",
    }

    top = object_schema(TOP_FIELDS, extension_keys=True)
    # `version` or Assay's `configVersion`, not both.
    top["anyOf"] = [{"required": ["version"]}, {"required": ["configVersion"]}]
    top["not"] = {"required": ["version", "configVersion"]}
    return {
        "$schema": JSON_SCHEMA_DIALECT,
        "title": "spanassert rules file (version 1)",
        "description": "Assertions about AI-agent tool calls, checked from OpenTelemetry spans.",
        **top,
        "$defs": defs,
    }
