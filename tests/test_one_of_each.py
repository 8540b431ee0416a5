"""Issue 13, "one of each": where the logic is the same, one piece of code serves every caller.
Structural checks read the source with `ast`; behavioural ones show both callers give one answer."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List

from test_assertions_rules_driver import Call, build, run

from spanassert.assertions.base import BuildContext

SRC = Path(__file__).resolve().parent.parent / "src" / "spanassert"


def _modules() -> Dict[str, ast.Module]:
    return {str(p.relative_to(SRC)): ast.parse(p.read_text(encoding="utf-8")) for p in sorted(SRC.rglob("*.py"))}


def _importers(module: str) -> List[str]:
    out = []
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name == module for a in node.names):
                out.append(name)
            elif isinstance(node, ast.ImportFrom) and node.module == module and not node.level:
                out.append(name)
    return out


def test_names_are_suggested_by_one_did_you_mean() -> None:
    # config/suggest.py (type suggestions by intent), replay/cli.py (--test ids) and the JSON Schema
    # keyword hints had their own difflib calls; now core/suggest.py alone ranks spellings.
    assert _importers("difflib") == ["core/suggest.py"]


def test_one_schema_cache_holds_every_compiled_schema() -> None:
    created = [name for name, tree in _modules().items() for node in ast.walk(tree)
               if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "SchemaCache"]
    assert created == ["assertions/schema_util.py"]
    from spanassert.assertions.schema_util import SCHEMAS, fast_predicate

    schema = {"type": "object", "properties": {"percent": {"type": "number", "maximum": 30}}}
    first = BuildContext().compile_schema(schema, field="schema")
    again = BuildContext().compile_schema(dict(schema), field="schema")
    assert first is again  # checked against its meta-schema once
    fast_predicate(first)
    assert SCHEMAS[id(first)][0] is first  # its fast predicate sits in the same cache


SCHEMA = {"type": "object", "properties": {"percent": {"type": "number", "maximum": 30}}}


def test_both_argument_schema_checks_word_a_violation_and_its_evidence_alike() -> None:
    calls = [Call("apply_discount", {"percent": 50})]
    trace = run(build("trace_args_valid", {"tool": "apply_discount", "schema": SCHEMA, "evidence": "arguments"},
                      surface="assertions"), calls)
    expected = run(build("args_valid", {"schema": {"apply_discount": SCHEMA}, "evidence": "arguments"}), calls)
    ref = "`apply_discount` arguments at call #1 (span 0000000000000001)"
    tail = 'percent: violates `maximum` 30; arguments: {"percent": 50}'
    assert trace.message == f"{ref} violate the schema: {tail}"
    assert expected.message == f"{ref} violate its schema: {tail}"


def test_a_keyed_hash_stands_in_for_the_arguments_in_both_argument_schema_checks() -> None:
    calls = [Call("apply_discount", {"percent": 50})]
    ctx = BuildContext(evidence_key=b"k")
    trace = run(build("trace_args_valid", {"tool": "apply_discount", "schema": SCHEMA}, surface="assertions",
                      ctx=ctx), calls)
    expected = run(build("args_valid", {"schema": {"apply_discount": SCHEMA}}, ctx=BuildContext(evidence_key=b"k")),
                   calls)
    shown = {m.split("; arguments: ", 1)[1] for m in (trace.message, expected.message)}
    assert len(shown) == 1 and next(iter(shown)).startswith("hmac:")


def test_typed_mappings_are_checked_by_one_walk() -> None:
    # The loader checked rules-file sections and assertion keys in two walks, and the sequence-rule
    # parser in a third (with its own jsonschema call per value): all now use config.fields.
    callers = sorted(name for name, tree in _modules().items() for node in ast.walk(tree)
                     if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "field_problems")
    assert callers == ["assertions/rules/parse.py", "config/build.py", "config/loader.py"]


def test_a_rule_key_and_an_assertion_key_are_reported_through_the_same_walk() -> None:
    from spanassert.config.fields import BAD_VALUE, MISSING_KEY, UNKNOWN_KEY, field_problems
    from spanassert.assertions.base import Field

    fields = {"tool": Field({"type": "string"}, required=True), "max": Field({"type": "integer", "minimum": 1})}
    found = [(p.kind, p.key) for p in field_problems({"tol": "x", "max": 0}, fields)]
    assert found == [(UNKNOWN_KEY, "tol"), (MISSING_KEY, "tool"), (BAD_VALUE, "max")]
