"""The compiled schema predicate must agree with jsonschema wherever it answers, and the messages of
``validation_messages`` must be exactly jsonschema's."""
from __future__ import annotations

import math
from typing import Any, Dict, List

import jsonschema
import pytest
from assertion_driver import drive, ok
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from spanassert.assertions.base import BuildContext
from spanassert.assertions.schema_fast import compile_fast
from spanassert.assertions.schema_util import fast_predicate, jsonschema_messages, validation_messages
from spanassert.core.model import Verdict

DIALECTS = [jsonschema.Draft6Validator, jsonschema.Draft7Validator, jsonschema.Draft201909Validator,
            jsonschema.Draft202012Validator]


def jsonschema_says_valid(validator: Any, instance: Any) -> bool:
    return not list(validator.iter_errors(instance))


# -- generators -------------------------------------------------------------------------------------

NAMES = ["a", "b", "amount", "é", "k😀"]
TEXT = st.text(alphabet="ab0é😀 \n", max_size=5)
NUMBERS = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([0.0, -0.0, 1.0, 2.0, 1.5, -2.5, 1e300, 2**53, 2**64, 10.0**20]),
    st.floats(-5, 5, allow_nan=False, width=16),
)
INSTANCE_SCALARS = st.one_of(
    st.none(), st.booleans(), NUMBERS, TEXT,
    st.sampled_from([float("nan"), float("inf"), -float("inf")]),
)
INSTANCES = st.recursive(
    INSTANCE_SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.one_of(st.sampled_from(NAMES), TEXT), inner, max_size=4)),
    max_leaves=12,
)
# Values a schema may quote (`enum`, `const`): JSON only, so no NaN or infinities.
SCHEMA_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), NUMBERS, TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(NAMES), inner, max_size=3)),
    max_leaves=6,
)
TYPE_NAMES = ["object", "array", "string", "number", "integer", "boolean", "null"]
PATTERNS = ["^a", "b$", "[0-9]+", "é", "^$", ".", "^.{2}$", "😀", "a|b", "^\\w+$"]
SIZES = st.integers(0, 4)
BOUNDS = st.one_of(st.integers(-3, 3), st.sampled_from([0.5, 1.0, -1.5, 2.0, 1e300, 2**64]))


TYPES = st.one_of(st.sampled_from(TYPE_NAMES), st.lists(st.sampled_from(TYPE_NAMES), min_size=1, max_size=3, unique=True))


def keywords(sub: st.SearchStrategy[Any]) -> st.SearchStrategy[Dict[str, Any]]:
    """A schema node with a few keywords (many at once would reject nearly every instance and hide
    a disagreement on any one of them)."""
    choices: Dict[str, st.SearchStrategy[Any]] = {
        "type": TYPES,
        "enum": st.lists(SCHEMA_VALUES, min_size=1, max_size=4),
        "const": SCHEMA_VALUES,
        "minimum": BOUNDS, "maximum": BOUNDS, "exclusiveMinimum": BOUNDS, "exclusiveMaximum": BOUNDS,
        "minLength": SIZES, "maxLength": SIZES, "pattern": st.sampled_from(PATTERNS),
        "items": sub, "minItems": SIZES, "maxItems": SIZES, "uniqueItems": st.booleans(),
        "properties": st.dictionaries(st.sampled_from(NAMES), sub, max_size=3),
        "required": st.lists(st.sampled_from(NAMES), max_size=3, unique=True),
        "additionalProperties": sub,
        "minProperties": SIZES, "maxProperties": SIZES,
        "allOf": st.lists(sub, min_size=1, max_size=2), "anyOf": st.lists(sub, min_size=1, max_size=3),
        "oneOf": st.lists(sub, min_size=1, max_size=3), "not": sub,
        "if": sub, "then": sub, "else": sub,
        "title": st.just("t"), "description": st.just("d"), "$comment": st.just("c"),
        "examples": st.lists(SCHEMA_VALUES, max_size=2), "default": SCHEMA_VALUES, "x-vendor": SCHEMA_VALUES,
    }
    names = st.lists(st.sampled_from(sorted(choices)), min_size=1, max_size=4, unique=True)
    return names.flatmap(lambda chosen: st.fixed_dictionaries({n: choices[n] for n in chosen}))


SCHEMAS = st.recursive(
    st.one_of(st.booleans(), st.just({})),
    lambda sub: keywords(sub),
    max_leaves=8,
)


def literals(schema: Any) -> List[Any]:
    """Values quoted in a schema, so instances hit `enum`/`const` and bounds exactly."""
    out: List[Any] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key in ("enum",):
                out.extend(value)
            elif key in ("const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
                out.append(value)
            elif isinstance(value, dict):
                if key == "properties":
                    for sub in value.values():
                        out.extend(literals(sub))
                else:
                    out.extend(literals(value))
            elif isinstance(value, list) and key in ("allOf", "anyOf", "oneOf"):
                for sub in value:
                    out.extend(literals(sub))
    return out


def twins(value: Any) -> List[Any]:
    """Values JSON Schema tells apart from ``value`` or not, though Python may not: 1 / 1.0 / True,
    and the same inside arrays and objects."""
    if isinstance(value, bool):
        return [int(value), float(value), [value]]
    if isinstance(value, int):
        out: List[Any] = [float(value) if abs(value) < 2**53 else value, [value]]
        return out + ([bool(value)] if value in (0, 1) else [])
    if isinstance(value, float):
        return [int(value)] + ([bool(value)] if value in (0.0, 1.0) else []) if value.is_integer() else [value]
    if isinstance(value, list):
        return [[t for t in (twins(v)[0] for v in value)], value[:-1]]
    if isinstance(value, dict):
        return [{k: twins(v)[0] for k, v in value.items()}, dict(list(value.items())[:-1])]
    return [value]


# One value on each side of every JSON type boundary.
EDGES: List[Any] = [True, False, 0, 1, -1, 0.0, 1.0, 1.5, 2**64, "", "a", "😀é", None, [], [1], {}, {"a": 1}]


# -- the differential property ----------------------------------------------------------------------


def check_agreement(schema: Any, dialect: Any, data: Any) -> None:
    try:
        dialect.check_schema(schema)
    except jsonschema.SchemaError:
        assume(False)  # e.g. duplicate `enum` values, which older meta-schemas refuse
    validator = dialect(schema)
    fast = compile_fast(validator)
    assert fast is not None, "every generated schema uses only supported keywords"
    quoted = literals(schema)
    quoted += [t for v in list(quoted) for t in twins(v)]
    pool = quoted + EDGES
    instances = list(pool)  # every quoted value, its look-alikes and every type boundary
    for _ in range(4):
        instances.append(data.draw(INSTANCES))
        # Objects and arrays whose members take quoted values reach nested bounds and `const`s.
        members = data.draw(st.lists(st.sampled_from(pool), max_size=3))
        instances.append(members)
        instances.append(dict(zip(data.draw(st.lists(st.sampled_from(NAMES), max_size=3, unique=True)), members)))
    for instance in instances:
        assert fast(instance) == jsonschema_says_valid(validator, instance), (schema, instance)
        assert validation_messages(validator, instance) == jsonschema_messages(validator, instance)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=SCHEMAS, dialect=st.sampled_from(DIALECTS), data=st.data())
def test_fast_predicate_agrees_with_jsonschema_on_the_supported_subset(schema: Any, dialect: Any, data: Any) -> None:
    check_agreement(schema, dialect, data)


@settings(max_examples=500, deadline=None)
@given(schema=st.builds(lambda typed, rest: {**rest, **typed}, st.fixed_dictionaries({}, optional={"type": TYPES}),
                        keywords(st.booleans())),
       dialect=st.sampled_from(DIALECTS), data=st.data())
def test_fast_predicate_agrees_with_jsonschema_on_flat_schemas(schema: Any, dialect: Any, data: Any) -> None:
    # Flat schemas put every type, bound and `enum` at the root, where most instances reach them.
    check_agreement(schema, dialect, data)


# -- keyword by keyword -----------------------------------------------------------------------------

CASES = [
    # type: JSON semantics; bool is neither integer nor number; 1.0 is an integer.
    ({"type": "integer"}, 3, True), ({"type": "integer"}, 3.0, True), ({"type": "integer"}, 3.5, False),
    ({"type": "integer"}, True, False), ({"type": "number"}, False, False), ({"type": "number"}, 2.5, True),
    ({"type": "boolean"}, 0, False), ({"type": "null"}, None, True), ({"type": "null"}, 0, False),
    ({"type": "object"}, [], False), ({"type": "array"}, {}, False), ({"type": "string"}, "x", True),
    ({"type": ["string", "null"]}, None, True), ({"type": ["string", "null"]}, 1, False),
    ({"type": "integer"}, float("inf"), False),
    # enum / const: 1 == 1.0 but True != 1; nested values compare the same way.
    ({"enum": ["a", "b"]}, "b", True), ({"enum": ["a", "b"]}, "c", False),
    ({"enum": [1, "a"]}, 1.0, True), ({"enum": [1, "a"]}, True, False), ({"enum": [0]}, False, False),
    ({"const": 1}, 1.0, True), ({"const": True}, 1, False), ({"const": [1, {"a": False}]}, [1.0, {"a": False}], True),
    ({"const": [1, {"a": False}]}, [1.0, {"a": 0}], False), ({"const": None}, None, True), ({"const": {}}, [], False),
    # numeric bounds apply to numbers only.
    ({"maximum": 1010}, 1010, True), ({"maximum": 1010}, 1010.5, False), ({"maximum": 1010}, "9999", True),
    ({"minimum": 0}, -0.0, True), ({"exclusiveMinimum": 0}, 0, False), ({"exclusiveMaximum": 1}, 0.99, True),
    ({"exclusiveMaximum": 1}, 1.0, False), ({"maximum": 1}, True, True),
    # strings: lengths in code points, pattern searched anywhere.
    ({"maxLength": 2}, "😀é", True), ({"maxLength": 1}, "😀é", False), ({"minLength": 1}, "", False),
    ({"minLength": 3}, 12345, True), ({"pattern": "b"}, "abc", True), ({"pattern": "^b"}, "abc", False),
    # arrays.
    ({"items": {"type": "integer"}}, [1, 2.0], True), ({"items": {"type": "integer"}}, [1, "2"], False),
    ({"items": False}, [], True), ({"items": False}, [0], False), ({"minItems": 2}, [1], False),
    ({"maxItems": 1}, [1, 2], False), ({"maxItems": 1}, "ab", True),
    # objects.
    ({"properties": {"a": {"type": "string"}}}, {"a": 1}, False), ({"properties": {"a": {"type": "string"}}}, {"b": 1}, True),
    ({"required": ["a"]}, {"b": 1}, False), ({"required": ["a"]}, ["a"], True),
    ({"properties": {"a": {}}, "additionalProperties": False}, {"a": 1, "b": 2}, False),
    ({"properties": {"a": {}}, "additionalProperties": False}, {"a": 1}, True),
    ({"additionalProperties": {"type": "number"}}, {"x": 1, "y": "z"}, False),
    ({"minProperties": 1}, {}, False), ({"maxProperties": 0}, {"a": 1}, False),
    # combinators.
    ({"anyOf": [{"type": "string"}, {"minimum": 3}]}, 1, False), ({"oneOf": [{"minimum": 0}, {"maximum": 5}]}, 3, False),
    ({"oneOf": [{"minimum": 0}, {"maximum": 5}]}, 7, True), ({"not": {"type": "null"}}, None, False),
    ({"allOf": [{"minimum": 0}, {"maximum": 5}]}, 6, False),
    # annotations and keywords unknown to the dialect are ignored, as jsonschema ignores them.
    ({"title": "t", "description": "d", "x-unit": "EUR", "default": 3, "$comment": "c"}, None, True),
    (True, {"anything": 1}, True), (False, None, False),
]


@pytest.mark.parametrize("dialect", DIALECTS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("schema, instance, valid", CASES)
def test_each_supported_keyword_matches_jsonschema(schema: Any, instance: Any, valid: bool, dialect: Any) -> None:
    validator = dialect(schema)
    fast = compile_fast(validator)
    assert fast is not None
    assert jsonschema_says_valid(validator, instance) is valid
    assert fast(instance) is valid


IF_THEN_ELSE = {"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"minimum": 0}}


@pytest.mark.parametrize("dialect", DIALECTS[1:], ids=lambda c: c.__name__)
@pytest.mark.parametrize("instance, valid", [("a", False), ("ab", True), (-1, False), (1, True)])
def test_if_then_else_matches_jsonschema_from_draft_7(instance: Any, valid: bool, dialect: Any) -> None:
    validator = dialect(IF_THEN_ELSE)
    assert jsonschema_says_valid(validator, instance) is valid
    assert compile_fast(validator)(instance) is valid


def test_the_benchmark_schema_compiles_and_checks_a_nested_bound() -> None:
    validator = BuildContext().compile_schema(
        {"type": "object", "properties": {"amount": {"type": "number", "maximum": 1010}}}, field="schema")
    fast = fast_predicate(validator)
    assert fast is not None and fast_predicate(validator) is fast  # compiled once, then cached
    assert fast({"amount": 12.5, "memo": "x"}) is True
    assert fast({"amount": 1010.01}) is False and fast({"amount": True}) is False and fast([]) is False
    assert validation_messages(validator, {"amount": 5000}) == ["amount: violates `maximum` 1010"]
    assert validation_messages(validator, {"amount": 10}) == []


def test_if_is_ignored_by_draft_6_which_does_not_know_it() -> None:
    schema = {"if": {"type": "string"}, "then": {"minLength": 5}}
    assert compile_fast(jsonschema.Draft6Validator(schema))("a") is True
    assert compile_fast(jsonschema.Draft7Validator(schema))("a") is False


# -- the fallback -----------------------------------------------------------------------------------


@pytest.mark.parametrize("schema", [
    {"$ref": "#/$defs/x", "$defs": {"x": {"type": "string"}}},
    {"type": "string", "format": "email"},
    {"patternProperties": {"^a": {"type": "string"}}},
    {"multipleOf": 0.5},
    {"prefixItems": [{"type": "string"}]},
    {"contains": {"type": "string"}},
    {"propertyNames": {"maxLength": 3}},
    {"dependentRequired": {"a": ["b"]}},
    {"unevaluatedProperties": False},
    {"properties": {"a": {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"}}},
    {"$id": "https://example.com/s", "type": "string"},
    {"properties": {"a": {"items": {"format": "date"}}}},
    {"anyOf": [{"type": "string"}, {"$ref": "#"}]},
])
def test_schema_with_a_keyword_outside_the_subset_has_no_fast_predicate(schema: Any) -> None:
    assert compile_fast(jsonschema.Draft202012Validator(schema)) is None


def test_tuple_items_of_draft_7_and_old_drafts_fall_back_to_jsonschema() -> None:
    assert compile_fast(jsonschema.Draft7Validator({"items": [{"type": "string"}]})) is None
    assert compile_fast(jsonschema.Draft7Validator({"additionalItems": False})) is None
    # Draft 4 has a boolean `exclusiveMaximum` and a stricter `integer`.
    assert compile_fast(jsonschema.Draft4Validator({"type": "integer"})) is None


def test_unsupported_schema_still_gets_jsonschema_messages() -> None:
    validator = BuildContext().compile_schema({"type": "string", "format": "ipv4"}, field="schema")
    assert fast_predicate(validator) is None
    assert validation_messages(validator, "not-an-ip") == ["(root): violates `format` 'ipv4'"]
    assert validation_messages(validator, "10.0.0.1") == []


def test_odd_instance_that_breaks_the_predicate_falls_back_to_jsonschema() -> None:
    validator = jsonschema.Draft202012Validator({"maximum": 3})
    # A complex number is a `numbers.Number` that cannot be ordered: both raise, and the fast path
    # must not swallow that into a verdict of its own.
    with pytest.raises(TypeError):
        validation_messages(validator, complex(1, 1))


def test_nan_and_infinity_are_compared_as_jsonschema_compares_them() -> None:
    validator = jsonschema.Draft202012Validator({"maximum": 3, "minimum": 0})
    fast = compile_fast(validator)
    for value in (math.nan, math.inf, -math.inf):
        assert fast(value) == jsonschema_says_valid(validator, value)


# -- verdicts through a real assertion --------------------------------------------------------------

REFUND = {
    "type": "trace_args_valid",
    "tool": "refund",
    "schema": {"type": "object", "properties": {"amount": {"type": "number", "maximum": 1010}},
               "required": ["amount"], "additionalProperties": False},
}


def test_args_valid_messages_are_jsonschemas_when_the_fast_path_says_invalid() -> None:
    run = drive(REFUND, [ok("refund", {"amount": 10}), ok("refund", {"amount": 2000, "note": "x"})])
    assert run.verdict is Verdict.FAILED
    assert run.first.failure.message == (
        "`refund` arguments at call #2 (span 0000000000000002) violate the schema: "
        "(root): violates `additionalProperties` False; amount: violates `maximum` 1010"
    )


def test_args_valid_passes_valid_calls_through_the_fast_path() -> None:
    calls = [ok("refund", {"amount": a}) for a in (0, 10.5, 1010, 1010.0)]
    assert drive(REFUND, calls).verdict is Verdict.PASSED


@pytest.mark.parametrize("instance", [
    [], ["a"], ["a", "b"], ["a", "a"], ["é", "é"], [1, 1.0], [True, 1], [False, 0], [0, 0.0, -0.0], [1, 2],
    [[1], [1.0]], [{"a": 1}, {"a": 1.0}], [{"a": 1}, {"a": True}], [None, None], ["1", 1], [1.5, 1.5],
    [float("nan"), float("nan")], [1.0, float("nan"), 1.0], ["a", 1, "a"],
])
def test_unique_items_agrees_with_jsonschema(instance: List[Any]) -> None:
    # session 9: `uniqueItems` joined the subset (a rule's `detectors` list declares it, so loading such
    # a rules file imported jsonschema, ~0.35 G instructions of a replay's start-up).
    for flag in (True, False):
        validator = jsonschema.Draft202012Validator({"type": "array", "uniqueItems": flag})
        fast = compile_fast(validator)
        assert fast is not None
        assert fast(instance) == jsonschema_says_valid(validator, instance), (flag, instance)


def test_unique_items_other_than_a_boolean_is_left_to_jsonschema() -> None:
    assert compile_fast(jsonschema.Draft202012Validator({"uniqueItems": 1})) is None
