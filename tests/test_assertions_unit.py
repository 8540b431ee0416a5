"""Unit-test forms (`assertions:` args_valid / sequence_valid / tool_blocklist): evaluated once at
load against data written in the rules file."""
from __future__ import annotations

import pytest
from test_assertions_rules_driver import Refused, build

from spanassert.core.model import Verdict

DISCOUNT_POLICY = {"schema": {"properties": {"percent": {"type": "number", "maximum": 30},
                                             "reason": {"type": "string"}},
                              "required": ["percent"]}}


def unit(type_name: str, values: dict):
    return build(type_name, values, surface="assertions")


def refused(type_name: str, values: dict) -> Refused:
    with pytest.raises(Refused) as info:
        unit(type_name, values)
    return info.value


# -- args_valid -----------------------------------------------------------------------------------
@pytest.mark.parametrize("percent", [10, 15, 25, 0])
def test_args_valid_accepts_discounts_within_the_maximum(percent):
    a = unit("args_valid", {"tool": "apply_discount", "policy": DISCOUNT_POLICY,
                            "test_args": {"percent": percent, "reason": "Loyalty program"}, "expect": "pass"})
    assert a.scope == "unit"
    assert a.ineffective_reason() is None
    assert a.evaluate_unit().verdict == Verdict.PASSED


def test_args_valid_expect_fail_passes_when_the_schema_rejects_the_arguments():
    a = unit("args_valid", {"tool": "apply_discount", "policy": DISCOUNT_POLICY,
                            "test_args": {"percent": 50}, "expect": "fail"})
    assert a.evaluate_unit().verdict == Verdict.PASSED


def test_args_valid_fails_when_the_policy_answers_the_opposite_of_expect():
    over = unit("args_valid", {"tool": "apply_discount", "policy": DISCOUNT_POLICY, "test_args": {"percent": 50}})
    out = over.evaluate_unit()
    assert out.verdict == Verdict.FAILED
    assert "expected the policy to answer pass, it answered fail" in out.message
    assert "percent: violates `maximum` 30" in out.message
    ok = unit("args_valid", {"tool": "apply_discount", "policy": DISCOUNT_POLICY,
                             "test_args": {"percent": 5}, "expect": "fail"})
    assert ok.evaluate_unit().verdict == Verdict.FAILED


def test_args_valid_accepts_a_bare_schema_and_defaults_missing_test_args_to_empty():
    a = unit("args_valid", {"tool": "t", "policy": {"required": ["percent"]}, "expect": "fail"})
    assert a.evaluate_unit().verdict == Verdict.PASSED


def test_args_valid_without_a_usable_or_with_a_vacuous_schema_is_ineffective():
    assert "no usable JSON Schema" in unit("args_valid", {"tool": "t"}).ineffective_reason()
    assert "accepts any arguments" in unit("args_valid", {"tool": "t", "policy": {"schema": {}}}).ineffective_reason()


def test_args_valid_with_an_invalid_schema_is_refused():
    assert refused("args_valid", {"tool": "t", "policy": {"schema": {"type": "percent"}}}).codes == ["E_CFG_SCHEMA"]


@pytest.mark.parametrize("bad", ["Pass", "PASS", "ok", True])
def test_expect_accepts_exactly_pass_or_fail(bad):
    assert refused("args_valid", {"tool": "t", "policy": DISCOUNT_POLICY, "expect": bad}).codes == ["E_CFG_SCHEMA"]


# -- sequence_valid -------------------------------------------------------------------------------
def test_sequence_valid_joins_tool_names_with_spaces_and_searches_the_regex():
    a = unit("sequence_valid", {"test_trace_raw": [{"tool": "submit_payment", "args": {"iban": "DE00"}}],
                                "policy": {"regex": "^submit_payment$"}, "expect": "pass"})
    assert a.ineffective_reason() is None
    assert a.evaluate_unit().verdict == Verdict.PASSED
    b = unit("sequence_valid", {"test_trace_raw": [{"tool": "login"}, {"tool_name": "pay"}],
                                "policy": {"regex": "login pay"}})
    assert b.evaluate_unit().verdict == Verdict.PASSED
    c = unit("sequence_valid", {"test_trace_raw": [{"tool": "pay"}, {"tool": "login"}],
                                "policy": {"regex": "login pay"}})
    out = c.evaluate_unit()
    assert out.verdict == Verdict.FAILED and "'pay login'" in out.message


def test_sequence_valid_expect_fail_pins_a_rejected_trace():
    a = unit("sequence_valid", {"test_trace_raw": [{"tool": "pay"}], "policy": {"regex": "^login"}, "expect": "fail"})
    assert a.evaluate_unit().verdict == Verdict.PASSED


def test_sequence_valid_test_trace_is_refused_pointing_to_test_trace_raw():
    err = refused("sequence_valid", {"test_trace": [{"tool": "a"}], "policy": {"regex": "a"}})
    assert "test_trace_raw" in err.errors[0][3]


def test_sequence_valid_without_a_usable_regex_is_ineffective():
    assert unit("sequence_valid", {"test_trace_raw": [{"tool": "a"}]}).ineffective_reason()
    assert unit("sequence_valid", {"policy": {"regex": ""}}).ineffective_reason()
    assert "matches every trace" in unit("sequence_valid", {"policy": {"regex": ".*"}}).ineffective_reason()
    assert refused("sequence_valid", {"policy": {"regex": "("}}).codes == ["E_CFG_REGEX"]


def test_sequence_valid_trace_entries_need_exactly_one_name_key():
    assert "exactly one of `tool` or `tool_name`" in refused(
        "sequence_valid", {"test_trace_raw": [{"args": {}}], "policy": {"regex": "a"}}).text
    # a misspelt `regex` is a free-form key (Assay accepts those, issue 19): said, and the form, with no
    # regex, cannot fail, so the loader refuses it as ineffective
    misspelt = unit("sequence_valid", {"policy": {"regexp": "a"}})
    assert "carries no regex" in misspelt.ineffective_reason()


# -- tool_blocklist -------------------------------------------------------------------------------
def test_tool_blocklist_expect_fail_when_a_supplied_call_is_blocked():
    a = unit("tool_blocklist", {"test_tool_calls": ["read_file", "delete_database"],
                                "policy": {"blocked": ["delete_database"]}, "expect": "fail"})
    assert a.evaluate_unit().verdict == Verdict.PASSED
    b = unit("tool_blocklist", {"test_tool_calls": ["read_file", "delete_database"],
                                "policy": {"blocked": ["delete_database"]}})
    out = b.evaluate_unit()
    assert out.verdict == Verdict.FAILED and "`delete_database` (test_tool_calls[1]) is blocked" in out.message


def test_tool_blocklist_is_an_exact_name_match():
    a = unit("tool_blocklist", {"test_tool_calls": ["delete_database_backup"], "policy": {"blocked": ["delete_database"]}})
    assert a.evaluate_unit().verdict == Verdict.PASSED


def test_tool_blocklist_with_an_absent_or_empty_blocklist_is_ineffective():
    assert unit("tool_blocklist", {"test_tool_calls": ["a"]}).ineffective_reason()
    assert unit("tool_blocklist", {"test_tool_calls": ["a"], "policy": {"blocked": []}}).ineffective_reason()
