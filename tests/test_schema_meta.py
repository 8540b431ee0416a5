"""A rules file's plain JSON Schema is checked against its meta-schema, and a failing value's errors
are found, without importing jsonschema (start-up, issue 15): both must be exactly what jsonschema
says. ``surely_valid`` never accepts a schema jsonschema's meta-schema check refuses (so every bad
schema keeps jsonschema's error), and the errors of a :class:`LazyValidator` are jsonschema's."""
from __future__ import annotations

from typing import Any, Dict

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_schema_fast import EDGES, INSTANCES, SCHEMAS, literals, twins

from spanassert.assertions.base import BuildContext
from spanassert.assertions.schema_meta import LazyValidator, surely_valid
from spanassert.assertions.schema_util import jsonschema_messages, validation_messages


def meta_valid(schema: Any) -> bool:
    # What BuildContext.compile_schema checks a schema without `$schema` and newer keywords against.
    try:
        jsonschema.Draft7Validator.check_schema(schema)
    except jsonschema.SchemaError:
        return False
    return True


# Values on both sides of what the Draft 7 meta-schema allows for each keyword.
ODD = st.sampled_from([-1, 1.5, 2.0, True, None, "3", "strng", [], ["string", "string"], ["a", "a"], [1], {},
                       {"a": 1}, {1: {}}, "(", "[a-", "^ok$", 0, "string", ["null", "integer"], 3])
ODD_KEYS = st.sampled_from(["type", "enum", "const", "minimum", "exclusiveMaximum", "minLength", "maxItems",
                            "pattern", "required", "properties", "additionalProperties", "items", "allOf", "anyOf",
                            "not", "if", "title", "$comment", "examples", "format", "$ref", "$schema",
                            "definitions", "$defs", "multipleOf", "uniqueItems", "x-vendor", "readOnly"])


def odd_schemas() -> st.SearchStrategy[Any]:
    return st.recursive(
        st.one_of(st.booleans(), st.just({}), st.integers(0, 2), st.just("x")),
        lambda sub: st.dictionaries(ODD_KEYS, st.one_of(ODD, sub, st.lists(sub, max_size=2)), min_size=1, max_size=3),
        max_leaves=6)


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(SCHEMAS, odd_schemas()))
def test_a_schema_checked_without_jsonschema_is_one_its_meta_schema_accepts(schema: Any) -> None:
    if surely_valid(schema):
        assert meta_valid(schema), schema
        # and the Draft 2020-12 validator the loader builds for it accepts it too
        jsonschema.Draft202012Validator.check_schema(schema)


def test_plain_schemas_are_accepted_and_bad_ones_left_to_jsonschema() -> None:
    good = [{"type": "object", "properties": {"order_id": {"type": "string", "pattern": "^ORD-"},
                                              "amount": {"type": "number", "exclusiveMinimum": 0, "maximum": 500}},
             "required": ["order_id", "amount"], "additionalProperties": False},
            {"anyOf": [{"type": "string"}, {"type": ["integer", "null"]}], "title": "t"}, True, {}]
    assert all(surely_valid(s) for s in good)
    bad = [{"type": "strng"}, {"pattern": "("}, {"required": ["a", "a"]}, {"minLength": -1}, {"minLength": True},
           {"maximum": "5"}, {"allOf": []}, {"title": 3}, {"type": []}, {"properties": {"a": 3}}]
    for s in bad:
        assert not surely_valid(s) and not meta_valid(s), s
    # Valid, but beyond the few keywords checked here: jsonschema decides.
    for s in [{"format": "email"}, {"$ref": "#/$defs/a", "$defs": {"a": {}}}, {"items": [{}]},
              {"$schema": "http://json-schema.org/draft-07/schema#"}, {"multipleOf": 2}]:
        assert not surely_valid(s) and meta_valid(s), s


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(SCHEMAS, st.data())
def test_the_errors_found_without_jsonschema_are_its_errors(schema: Any, data: Any) -> None:
    if not surely_valid(schema):
        return
    real = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    quoted = literals(schema)
    pool = EDGES + quoted + [t for v in quoted for t in twins(v)]
    instance = data.draw(st.one_of(INSTANCES, st.sampled_from(pool),
                                   st.dictionaries(st.sampled_from(["a", "b", "amount", "é"]),
                                                   st.sampled_from(pool), max_size=3)))
    lazy = LazyValidator(schema)
    assert jsonschema_messages(lazy, instance, limit=1000) == jsonschema_messages(real, instance, limit=1000)
    assert validation_messages(lazy, instance) == validation_messages(real, instance)
    assert lazy._real is None  # jsonschema was never asked


def test_the_loader_gives_a_plain_schema_a_lazy_validator_and_words_a_bad_one_with_jsonschema() -> None:
    ctx = BuildContext()
    plain: Dict[str, Any] = {"type": "object", "properties": {"amount": {"maximum": 500}}}
    validator = ctx.compile_schema(plain, field="schema")
    assert isinstance(validator, LazyValidator) and ctx.errors == []
    assert validation_messages(validator, {"amount": 501}) == ["amount: violates `maximum` 500"]
    assert validator.is_valid({"amount": 5})  # anything else is the real validator's
    ctx = BuildContext()
    assert ctx.compile_schema({"type": "object", "properties": {"amount": {"maximum": "500"}}}, field="schema") is None
    assert len(ctx.errors) == 1 and ctx.errors[0][0] == "E_CFG_SCHEMA" and "invalid JSON Schema" in ctx.errors[0][1]
    assert ctx.errors[0][2] == "schema.properties.amount.maximum"


@pytest.mark.parametrize("schema", [{"type": "string"}, {"maximum": 3}])
def test_a_lazy_validator_copies_and_pickles_without_building(schema: Any) -> None:
    import copy
    import pickle

    v = LazyValidator(schema)
    assert copy.deepcopy(v).schema == schema and pickle.loads(pickle.dumps(v)).schema == schema
    assert v._real is None
