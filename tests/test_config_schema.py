"""The JSON Schema of the rules file (``spanassert schema``) agrees with the loader: it accepts what
loads and rejects what the loader refuses for structural reasons."""
from __future__ import annotations

import json
from typing import Any, Dict

import jsonschema
import pytest
import yaml

from spanassert.assertions.base import COMMON_FIELDS
from spanassert.assertions.registry import ASSERTION_TYPES, EXPECTED_TYPES
from spanassert.config import ConfigError, load_config
from spanassert.config.schema import JSON_SCHEMA_DIALECT, SEVERITIES, build_schema
from test_config_seeds import _expected_refusal, _seeds_available, seed_examples


@pytest.fixture(scope="module")
def validator() -> Any:
    schema = build_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def as_json(text: str) -> Any:
    # What an editor's YAML language server validates: the data model, through JSON.
    return json.loads(json.dumps(yaml.safe_load(text)))


FULL = """
version: 1
suite: payments
settings: {parallel: 2, max_match_chars: 1000, x-owner: core}
episodes: {key: session.id, idle_timeout: 30s, max_open: 50}
mappings:
  - when: {span_name_prefix: "tool.", framework: acme}
    tool_name_from_span: true
  - when: {acme.kind: agent}
    role: agent
tests:
  - id: refunds
    match: {agent: [support, billing], attributes: {tenant: eu}}
    severity: critical
    mode: shadow
    input: {prompt: refund order 7}
    tags: [refund]
    expected:
      type: sequence_valid
      sequence: [lookup_order, refund]
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
      - type: trace_must_call_tool
        tool: lookup_order
        min_calls: 1
        evidence: arguments
  - id: legacy
    expected:
      - must_contain: Tokyo
    assertions:
      - {type: trace_max_steps, max: 8}
"""


def test_schema_is_draft_2020_12_and_declares_its_dialect(validator: Any) -> None:
    schema = build_schema()
    assert schema["$schema"] == JSON_SCHEMA_DIALECT
    assert schema["additionalProperties"] is False
    assert "tests" in schema["required"]
    assert schema["$defs"]["test"]["properties"]["severity"]["enum"] == list(SEVERITIES)
    assert schema["$defs"]["test"]["required"] == ["id"]
    assert schema["$defs"]["test"]["additionalProperties"] is False


def test_schema_has_one_closed_definition_per_registered_type() -> None:
    import spanassert.assertions  # noqa: F401

    defs = build_schema()["$defs"]
    assert set(ASSERTION_TYPES) and set(EXPECTED_TYPES)
    for surface, registry in (("assertion", ASSERTION_TYPES), ("expected", EXPECTED_TYPES)):
        for name, cls in registry.items():
            d = defs[f"{surface}.{name}"]
            assert d["additionalProperties"] is False
            assert set(d["properties"]) == {"type"} | set(COMMON_FIELDS) | set(cls.fields)
            assert d["properties"]["type"] == {"const": name}
            assert set(d["required"]) == {"type"} | {k for k, f in cls.fields.items() if f.required}
    assert defs["assertion"]["properties"]["type"]["enum"] == sorted(ASSERTION_TYPES)


def test_full_example_is_accepted_by_schema_and_loader(validator: Any) -> None:
    assert list(validator.iter_errors(as_json(FULL))) == []
    assert [t.id for t in load_config(FULL).tests] == ["refunds", "legacy"]


@pytest.mark.parametrize("text, keyword", [
    ("version: 1\ntets: []\ntests: [{id: t}]\n", "additionalProperties"),
    ("tests: [{id: t}]\n", "anyOf"),
    ("version: 2\ntests: [{id: t}]\n", "const"),
    ("version: 1\npolicies: []\ntests: [{id: t}]\n", "additionalProperties"),
    ("version: 1\ntests: []\n", "minItems"),
    ("version: 1\ntests: [{id: t, severity: high}]\n", "enum"),
    ("version: 1\ntests: [{id: t, assertions: [{type: trace_must_call_tool, tool: a, min_call: 2}]}]\n", "oneOf"),
    ("version: 1\ntests: [{id: t, assertions: [{type: no_such_type}]}]\n", "enum"),
    ("version: 1\ntests: [{id: t, expected: null}]\n", "anyOf"),
    ("version: 1\ntests: [{id: t, expected: [{must_contain: a}, {must_contain: b}]}]\n", "anyOf"),
    ("version: 1\ntests: [{id: t, expected: {must_contains: [a]}}]\n", "anyOf"),
    ("version: 1\nsettings: {paralel: 1}\ntests: [{id: t}]\n", "additionalProperties"),
    ("version: 1\nmappings: [{when: {a: 1}}]\ntests: [{id: t}]\n", "anyOf"),
    ("version: 1\nepisodes: {idle_timeout: soon}\ntests: [{id: t}]\n", "anyOf"),
])
def test_schema_rejects_what_the_loader_refuses(validator: Any, text: str, keyword: str) -> None:
    errors = list(validator.iter_errors(as_json(text)))
    assert errors, text
    assert any(e.validator == keyword or any(c.validator == keyword for c in e.context) for e in errors), \
        [(e.validator, e.message) for e in errors]
    with pytest.raises(ConfigError):
        load_config(text)


def test_schema_accepts_every_seed_example_that_loads(validator: Any) -> None:
    _seeds_available()
    examples, _ = seed_examples()
    checked = 0
    for example in examples:
        if _expected_refusal(example) is not None:
            continue
        errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
                  for e in validator.iter_errors(as_json(example.rules_file))]
        assert errors == [], (example.source, errors)
        checked += 1
    assert checked >= 15


def test_schema_defaults_and_descriptions_come_from_the_field_declarations() -> None:
    defs: Dict[str, Any] = build_schema()["$defs"]
    min_calls = defs["assertion.trace_must_call_tool"]["properties"]["min_calls"]
    field = ASSERTION_TYPES["trace_must_call_tool"].fields["min_calls"]
    assert min_calls.get("default") == field.default
    assert min_calls.get("description") == field.doc
    assert defs["episodes"]["properties"]["key"]["default"] == "trace"
