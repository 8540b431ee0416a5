"""`expected:` checks: final-output checks, recorded-call checks, and the refused Assay types."""
from __future__ import annotations

import json
import math
from typing import List

import pytest
import jsonschema
from test_assertions_rules_driver import Call, Refused, build, footprint, run

from spanassert.assertions.base import BuildContext
from spanassert.assertions.registry import ASSERTION_TYPES, EXPECTED_TYPES
from spanassert.core.model import Verdict


def refused(type_name: str, values: dict, ctx: BuildContext = None) -> Refused:
    with pytest.raises(Refused) as info:
        build(type_name, values, ctx=ctx)
    return info.value


# -- must_contain / must_not_contain --------------------------------------------------------------
def test_must_contain_needs_every_substring_case_sensitively():
    a = build("must_contain", {"must_contain": ["Tokyo", "sunny"]})
    assert run(a, [], final_output="Tokyo is sunny").verdict == Verdict.PASSED
    r = run(a, [], final_output="tokyo is sunny")
    assert r.verdict == Verdict.FAILED and "'Tokyo'" in r.message


def test_must_contain_accepts_the_legacy_scalar():
    a = build("must_contain", {"must_contain": "passed"})
    assert run(a, [], final_output="passed").verdict == Verdict.PASSED
    assert run(a, [], final_output="nope").verdict == Verdict.FAILED


def test_empty_must_contain_is_refused_because_it_would_pass_for_any_response():
    err = refused("must_contain", {"must_contain": []})
    assert "would pass for any response" in err.text
    assert err.codes == ["E_CFG_VACUOUS"]


def test_an_empty_must_contain_entry_is_refused():
    assert "empty string" in refused("must_contain", {"must_contain": ["ok", ""]}).text


def test_must_not_contain_fails_on_a_forbidden_substring_and_refuses_an_empty_entry():
    a = build("must_not_contain", {"must_not_contain": ["nooit"]})
    assert run(a, [], final_output="altijd").verdict == Verdict.PASSED
    assert run(a, [], final_output="dat nooit").verdict == Verdict.FAILED
    err = refused("must_not_contain", {"must_not_contain": [""]})
    assert "no response could pass" in err.text


def test_an_unrecorded_final_output_is_inconclusive_never_passed():
    a = build("must_not_contain", {"must_not_contain": ["secret"]})
    r = run(a, [], final_output=None)
    assert r.verdict == Verdict.INCONCLUSIVE and "not recorded" in r.message


def test_a_cut_short_episode_leaves_output_checks_inconclusive():
    a = build("must_contain", {"must_contain": ["done"]})
    assert run(a, [], final_output="done", decidable=False).verdict == Verdict.INCONCLUSIVE


# -- regex ----------------------------------------------------------------------------------------
def test_regex_match_searches_with_flags():
    a = build("regex_match", {"pattern": "world"})
    assert run(a, [], final_output="hello world").verdict == Verdict.PASSED
    assert run(a, [], final_output="hello World").verdict == Verdict.FAILED
    ai = build("regex_match", {"pattern": "^world$", "flags": ["i", "m"]})
    assert run(ai, [], final_output="hello\nWORLD").verdict == Verdict.PASSED


def test_regex_not_match_fails_on_a_match_and_refuses_an_empty_pattern():
    a = build("regex_not_match", {"pattern": r"\b\d{16}\b"})
    assert run(a, [], final_output="card 4111111111111111").verdict == Verdict.FAILED
    assert run(a, [], final_output="no card").verdict == Verdict.PASSED
    assert refused("regex_not_match", {"pattern": ""}).codes == ["E_CFG_UNSATISFIABLE"]
    assert refused("regex_match", {"pattern": ""}).codes == ["E_CFG_VACUOUS"]


def test_regex_flags_outside_i_m_s_and_bad_patterns_are_refused():
    assert refused("regex_match", {"pattern": "a", "flags": ["x"]}).codes == ["E_CFG_SCHEMA"]
    assert refused("regex_match", {"pattern": "("}).codes == ["E_CFG_REGEX"]


def test_regex_not_match_does_not_pass_text_it_did_not_search():
    ctx = BuildContext()
    ctx.settings["regex_timeout_chars"] = 10
    a = build("regex_not_match", {"pattern": "secret"}, ctx=ctx)
    assert run(a, [], final_output="x" * 20 + "secret").verdict == Verdict.INCONCLUSIVE


# -- json_schema ----------------------------------------------------------------------------------
def test_json_schema_from_a_json_string_validates_the_output():
    schema = json.dumps({"type": "object", "required": ["city"], "properties": {"temp": {"maximum": 60}}})
    a = build("json_schema", {"json_schema": schema})
    assert run(a, [], final_output='{"city": "Tokyo", "temp": 20}').verdict == Verdict.PASSED
    r = run(a, [], final_output='{"city": "Tokyo", "temp": 99}')
    assert r.verdict == Verdict.FAILED and "temp: violates `maximum` 60" in r.message
    assert "99" not in r.message  # values are evidence, not message text
    assert run(a, [], final_output="not json").verdict == Verdict.FAILED


def test_json_schema_accepts_an_inline_mapping_and_a_schema_file(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps({"type": "array"}))
    a = build("json_schema", {"schema_file": "s.json"}, ctx=BuildContext(base_dir=str(tmp_path)))
    assert run(a, [], final_output="[1]").verdict == Verdict.PASSED
    b = build("json_schema", {"json_schema": {"type": "array"}})
    assert run(b, [], final_output="{}").verdict == Verdict.FAILED


def test_json_schema_invalid_json_string_or_schema_is_refused_and_vacuous_is_ineffective():
    assert "not valid JSON" in refused("json_schema", {"json_schema": "{nope"}).text
    assert refused("json_schema", {"json_schema": '{"type": 5}'}).codes == ["E_CFG_SCHEMA"]
    assert build("json_schema", {"json_schema": "{}"}).ineffective_reason()
    assert build("json_schema", {"json_schema": '{"type": "object"}'}).ineffective_reason() is None


# -- semantic similarity --------------------------------------------------------------------------
def _bag_of_letters(text: str) -> List[float]:
    return [float(text.lower().count(c)) for c in "abcdefghijklmnopqrstuvwxyz"]


def test_semantic_similarity_without_an_embedder_is_inconclusive_never_passed():
    # issue 19: without settings.embedder it is judged only on spans carrying precomputed embeddings
    ctx = BuildContext()
    a = build("semantic_similarity_to", {"semantic_similarity_to": "hello"}, ctx=ctx)
    assert [w[0] for w in ctx.warnings] == ["W_CFG_EMBEDDINGS_FROM_TRACE"]
    r = run(a, [], final_output="hello")
    assert r.verdict == Verdict.INCONCLUSIVE and "no embedder is configured" in r.message


def test_semantic_similarity_passes_at_or_above_min_score():
    ctx = BuildContext()
    ctx.settings["embedder"] = _bag_of_letters
    a = build("semantic_similarity_to", {"semantic_similarity_to": "the weather in tokyo is sunny"}, ctx=ctx)
    assert a.min_score == pytest.approx(0.80)
    assert run(a, [], final_output="Tokyo weather: sunny").verdict == Verdict.PASSED
    r = run(a, [], final_output="zzz qqq xxx")
    assert r.verdict == Verdict.FAILED and "below min_score 0.80" in r.message


def test_semantic_similarity_aliases_text_and_threshold():
    ctx = BuildContext()
    ctx.settings["embedder"] = "test_assertions_expected:_bag_of_letters"
    a = build("semantic_similarity_to", {"text": "abc", "threshold": 0.99}, ctx=ctx)
    assert a.reference == "abc" and a.min_score == 0.99
    assert run(a, [], final_output="cab").verdict == Verdict.PASSED
    assert run(a, [], final_output="abcd").verdict == Verdict.FAILED
    both = BuildContext()
    both.settings["embedder"] = _bag_of_letters
    assert "once" in refused("semantic_similarity_to", {"text": "a", "semantic_similarity_to": "b"}, ctx=both).text


def test_semantic_similarity_embedder_failure_is_inconclusive():
    def broken(_: str) -> List[float]:
        raise RuntimeError("model offline")

    ctx = BuildContext()
    ctx.settings["embedder"] = broken
    a = build("semantic_similarity_to", {"text": "abc"}, ctx=ctx)
    assert run(a, [], final_output="abc").verdict == Verdict.INCONCLUSIVE


def test_cosine_similarity_is_exact():
    from spanassert.assertions.expected import cosine_similarity

    assert cosine_similarity([1.0, 0.0], [1.0, 1.0]) == pytest.approx(1 / math.sqrt(2))
    assert cosine_similarity([0.0, 0.0], [1.0, 1.0]) is None
    assert cosine_similarity([1.0], [1.0, 2.0]) is None


# -- args_valid over recorded calls ---------------------------------------------------------------
DISCOUNT = {"apply_discount": {"type": "object", "properties": {"percent": {"type": "number", "maximum": 30}},
                               "required": ["percent"]}}


def test_args_valid_fails_at_the_call_whose_arguments_violate_the_schema():
    a = build("args_valid", {"schema": DISCOUNT})
    r = run(a, [Call("search"), Call("apply_discount", {"percent": 10}), Call("apply_discount", {"percent": 50})])
    assert r.verdict == Verdict.FAILED
    assert r.failures[0].call_index == 2
    assert r.message == ("`apply_discount` arguments at call #3 (span 0000000000000003) violate its schema: "
                         "percent: violates `maximum` 30")


def test_args_valid_reports_arguments_known_at_span_start_before_the_call_runs():
    a = build("args_valid", {"schema": DISCOUNT})
    r = run(a, [Call("apply_discount", {"percent": 50})])
    assert r.early == {r.failures[0].span_id: "start"}
    late = run(a, [Call("apply_discount", {"percent": 50}, args_at_start=False)])
    assert late.early == {late.failures[0].span_id: "end"}


def test_args_valid_shows_argument_values_only_when_the_rule_opts_in():
    a = build("args_valid", {"schema": DISCOUNT, "evidence": "arguments"})
    r = run(a, [Call("apply_discount", {"percent": 50})])
    assert '{"percent": 50}' in r.message


def test_args_valid_unrecorded_arguments_are_inconclusive_and_tools_without_schema_ignored():
    a = build("args_valid", {"schema": DISCOUNT})
    assert a.tools == frozenset({"apply_discount"})
    assert run(a, [Call("apply_discount", record_args=False)]).verdict == Verdict.INCONCLUSIVE
    assert run(a, [Call("apply_discount", '{"percent": 1')]).verdict == Verdict.INCONCLUSIVE  # truncated JSON
    assert run(a, [Call("other", {"percent": 99})]).verdict == Verdict.NOT_APPLICABLE
    assert run(a, [Call("apply_discount", {"percent": 5})]).verdict == Verdict.PASSED


def test_args_valid_reads_a_policy_file_and_needs_a_schema_or_policy(tmp_path):
    (tmp_path / "p.yaml").write_text("apply_discount:\n  properties:\n    percent: {maximum: 30}\n")
    a = build("args_valid", {"policy": "p.yaml"}, ctx=BuildContext(base_dir=str(tmp_path)))
    assert run(a, [Call("apply_discount", {"percent": 31})]).verdict == Verdict.FAILED
    assert refused("args_valid", {}).codes == ["E_CFG_VACUOUS"]
    assert "cannot read policy file" in refused("args_valid", {"policy": str(tmp_path / "none.yaml")}).text


def test_args_valid_refuses_a_bare_schema_where_a_tool_map_belongs():
    err = refused("args_valid", {"schema": {"properties": {"percent": {"maximum": 30}}}})
    assert "JSON Schema keyword, not a tool name" in err.text


def test_args_valid_with_only_vacuous_schemas_is_ineffective():
    assert build("args_valid", {"schema": {"t": {"description": "anything"}}}).ineffective_reason()


# -- tool_output_valid ----------------------------------------------------------------------------
def test_tool_output_valid_checks_results_with_shared_defs():
    schemas = {"$defs": {"temp": {"type": "number"}},
               "weather": {"type": "object", "properties": {"t": {"$ref": "#/$defs/temp"}}, "required": ["t"]}}
    a = build("tool_output_valid", {"schemas": schemas})
    assert a.tools == frozenset({"weather"})
    assert run(a, [Call("weather", {}, {"t": 20})]).verdict == Verdict.PASSED
    r = run(a, [Call("weather", {}, '{"t": "hot"}')])
    assert r.verdict == Verdict.FAILED and "result at call #1 (span 0000000000000001) violates its schema" in r.message
    assert run(a, [Call("weather", {})]).verdict == Verdict.INCONCLUSIVE


# -- tool_blocklist -------------------------------------------------------------------------------
def test_tool_blocklist_is_an_exact_match_reported_at_span_start():
    a = build("tool_blocklist", {"blocked": ["delete_database"]})
    r = run(a, ["read", "delete_database_backup", "delete_database"])
    assert r.verdict == Verdict.FAILED
    assert r.message == "blocked tool `delete_database` called at call #3 (span 0000000000000003)"
    assert list(r.early.values()) == ["start"]
    assert run(a, ["read"]).verdict == Verdict.PASSED
    assert refused("tool_blocklist", {"blocked": []}).codes == ["E_CFG_VACUOUS"]


# -- sequence_valid -------------------------------------------------------------------------------
def test_sequence_valid_rules_fail_with_the_rule_reason():
    a = build("sequence_valid", {"rules": [{"type": "require", "tool": "missing_tool"}]})
    r = run(a, ["fake_tool"])
    assert r.verdict == Verdict.FAILED
    assert r.message == "sequence_valid rule failed: required tool 'missing_tool' not found in trace"


def test_sequence_valid_executes_all_eight_rule_kinds():
    specs = [
        ({"type": "require", "tool": "b"}, ["a"]),
        ({"type": "before", "first": "a", "then": "b"}, ["b", "a"]),
        ({"type": "blocklist", "pattern": "del"}, ["delete"]),
        ({"type": "max_calls", "tool": "a", "max": 1}, ["a", "a"]),
        ({"type": "eventually", "tool": "b", "within": 1}, ["a", "b"]),
        ({"type": "after", "trigger": "a", "then": "b"}, ["a", "c"]),
        ({"type": "never_after", "trigger": "a", "forbidden": "b"}, ["a", "b"]),
        ({"type": "sequence", "tools": ["a", "b"]}, ["b", "a"]),
    ]
    for spec, calls in specs:
        assert run(build("sequence_valid", {"rules": [spec]}), calls).verdict == Verdict.FAILED, spec


def test_sequence_valid_reports_never_after_at_the_forbidden_span():
    a = build("sequence_valid", {"rules": [{"type": "never_after", "trigger": "read_credentials", "forbidden": "http_post"}]})
    r = run(a, ["list_dir", "read_credentials", "http_post", "done"])
    assert r.failures[0].call_index == 2 and r.early == {r.failures[0].span_id: "start"}


def test_sequence_valid_with_only_vacuous_rules_is_not_applicable():
    a = build("sequence_valid", {"rules": [{"type": "before", "first": "auth", "then": "write"}]})
    r = run(a, ["read"])
    assert r.verdict == Verdict.NOT_APPLICABLE and "every sequence rule was vacuous" in r.message


def test_sequence_valid_exact_sequence_and_the_empty_sequence():
    a = build("sequence_valid", {"sequence": ["login", "logout"]})
    assert run(a, ["login", "logout"]).verdict == Verdict.PASSED
    r = run(a, ["login", "view", "logout"])
    assert r.verdict == Verdict.FAILED and "expected `logout` as call #2 of the sequence, found `view` at call #2" in r.message
    assert "never came" in run(a, ["login"]).message
    none = build("sequence_valid", {"sequence": []})
    assert run(none, []).verdict == Verdict.PASSED
    assert run(none, ["x"]).verdict == Verdict.FAILED


def test_sequence_valid_empty_rules_without_sequence_is_refused_even_with_a_policy(tmp_path):
    (tmp_path / "p.yaml").write_text("- type: require\n  tool: a\n")
    ctx = BuildContext(base_dir=str(tmp_path))
    assert "E_CFG_VACUOUS" in refused("sequence_valid", {"rules": [], "policy": "p.yaml"}, ctx=ctx).codes
    assert refused("sequence_valid", {}).codes == ["E_CFG_VACUOUS"]
    assert run(build("sequence_valid", {"rules": [], "sequence": ["a"]}), ["a"]).verdict == Verdict.PASSED


def test_sequence_valid_before_with_same_operands_cannot_constrain():
    assert "cannot constrain" in refused("sequence_valid", {"rules": [{"type": "before", "first": "a", "then": "a"}]}).text


def test_sequence_valid_policy_file_with_aliases_and_rules(tmp_path):
    (tmp_path / "policy.yaml").write_text(
        "version: '1.1'\n"
        "aliases:\n  Search: [search_web, search_kb]\n"
        "sequences:\n  - type: before\n    first: Search\n    then: answer\n"
    )
    a = build("sequence_valid", {"policy": "policy.yaml"}, ctx=BuildContext(base_dir=str(tmp_path)))
    assert run(a, ["search_kb", "answer"]).verdict == Verdict.PASSED
    assert run(a, ["answer", "search_web"]).verdict == Verdict.FAILED


def test_sequence_valid_policy_file_as_a_list_of_names(tmp_path):
    (tmp_path / "seq.json").write_text('["a", "b"]')
    a = build("sequence_valid", {"policy": "seq.json"}, ctx=BuildContext(base_dir=str(tmp_path)))
    assert run(a, ["a", "b"]).verdict == Verdict.PASSED
    assert run(a, ["b", "a"]).verdict == Verdict.FAILED


def test_sequence_valid_keeps_start_order_when_arguments_arrive_at_span_end():
    rule = {"type": "never_after", "trigger": {"tool": "bash", "args_match": {"cmd": "credentials"}},
            "forbidden": "http_post"}
    a = build("sequence_valid", {"rules": [rule]})
    calls = [Call("bash", {"cmd": "cat credentials"}, args_at_start=False), Call("http_post")]
    # Both start before either ends; the http_post span ends first.
    r = run(a, calls, overlap=True)
    assert r.verdict == Verdict.FAILED and r.failures[0].call_index == 1
    safe = [Call("bash", {"cmd": "ls"}, args_at_start=False), Call("http_post")]
    assert run(a, safe, overlap=True).verdict == Verdict.NOT_APPLICABLE


def test_sequence_valid_liveness_is_inconclusive_on_a_cut_short_episode():
    a = build("sequence_valid", {"rules": [{"type": "require", "tool": "x"}]})
    assert run(a, ["a"], decidable=False).verdict == Verdict.INCONCLUSIVE
    s = build("sequence_valid", {"sequence": ["a", "b"]})
    assert run(s, ["a"], decidable=False).verdict == Verdict.INCONCLUSIVE


def test_sequence_valid_unknown_rule_key_is_refused_with_its_path():
    err = refused("sequence_valid", {"rules": [{"type": "max_calls", "tool": "a", "max_call": 1}]})
    assert "did you mean `max_calls`" not in err.text  # the type is right; the key is wrong
    assert any(e[2] == "rules[0].max_call" for e in err.errors)


# -- not executable -------------------------------------------------------------------------------
@pytest.mark.parametrize("type_name,values,word", [
    ("faithfulness", {"min_score": 0.7}, "LLM judge"),
    ("relevance", {}, "LLM judge"),
    ("judge_criteria", {"judge_criteria": {"tone": "polite"}}, "LLM judge"),
    ("tool_description_integrity", {"pinned_tools": [{"name": "a"}]}, "tool definitions"),
    ("tool_collision_detect", {"trusted_servers": ["s"]}, "tool definitions"),
])
def test_assay_types_that_need_a_judge_or_tool_definitions_are_refused_specifically(type_name, values, word):
    err = refused(type_name, values)
    assert err.codes == ["E_CFG_NOT_EXECUTABLE"]
    assert type_name in err.text and word in err.text


# -- what every type of this family promises ------------------------------------------------------

MINE_EXPECTED = ["must_contain", "must_not_contain", "regex_match", "regex_not_match", "json_schema",
                 "semantic_similarity_to", "args_valid", "sequence_valid", "tool_blocklist", "tool_output_valid",
                 "faithfulness", "relevance", "judge_criteria", "tool_description_integrity", "tool_collision_detect"]


@pytest.mark.parametrize("type_name", MINE_EXPECTED)
def test_expected_type_is_registered_and_documented(type_name):
    cls = EXPECTED_TYPES[type_name]
    assert cls.type_name == type_name
    assert cls.doc and "\n\n" not in cls.doc
    for name, field in cls.fields.items():
        assert field.doc, f"{type_name}.{name} has no doc"
        jsonschema.Draft202012Validator.check_schema(field.schema)


@pytest.mark.parametrize("type_name", ["args_valid", "sequence_valid", "tool_blocklist"])
def test_unit_forms_share_the_names_but_not_the_fields(type_name):
    assert ASSERTION_TYPES[type_name].scope == "unit"
    assert EXPECTED_TYPES[type_name].scope == "trace"
    assert ASSERTION_TYPES[type_name].fields.keys() != EXPECTED_TYPES[type_name].fields.keys()


STATE_CASES = [
    ("sequence_valid", {"rules": [{"type": "require", "tool": "zzz"}]}, ["x"]),
    ("sequence_valid", {"rules": [{"type": "before", "first": "x", "then": "zzz"}]}, ["x"]),
    ("sequence_valid", {"rules": [{"type": "blocklist", "pattern": "zzz"}]}, ["x"]),
    ("sequence_valid", {"rules": [{"type": "max_calls", "tool": "x", "max": 10 ** 6}]}, ["x"]),
    ("sequence_valid", {"rules": [{"type": "eventually", "tool": "zzz", "within": 10 ** 6}]}, ["x"]),
    ("sequence_valid", {"rules": [{"type": "after", "trigger": "x", "then": "y", "within": 2}]}, ["x", "y"]),
    ("sequence_valid", {"rules": [{"type": "never_after", "trigger": "x", "forbidden": "zzz"}]}, ["x"]),
    ("sequence_valid", {"rules": [{"type": "sequence", "tools": ["x", "zzz"]}]}, ["x"]),
    ("sequence_valid", {"rules": [{"type": "require", "tool": {"tool": "x", "args_match": {"q": "no"}}}]},
     [Call("x", {"q": "yes"}, args_at_start=False)]),
    ("args_valid", {"schema": {"x": {"type": "object"}}}, [Call("x", {"q": 1})]),
    ("tool_output_valid", {"schemas": {"x": {"type": "object"}}}, [Call("x", {}, {"r": 1})]),
    ("tool_blocklist", {"blocked": ["zzz"]}, ["x"]),
]


@pytest.mark.parametrize("type_name, values, cycle", STATE_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(STATE_CASES)])
def test_state_size_does_not_grow_with_the_number_of_calls(type_name, values, cycle):
    a = build(type_name, values)
    sizes = [footprint(run(a, cycle * n).state) for n in (500, 5000)]
    assert sizes[0] == sizes[1]
