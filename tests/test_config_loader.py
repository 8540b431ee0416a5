"""The rules-file loader, driven with small assertion types registered by these tests (so the loader's
own behaviour is pinned independently of the real assertion modules)."""
from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

from spanassert.assertions.base import Assertion, BuildContext, Field
from spanassert.assertions.registry import ASSERTION_TYPES, EXPECTED_TYPES
from spanassert.config import ConfigError, load_config
from spanassert.config.model import Config
from spanassert.core.model import Diagnostic, Outcome, Severity, Verdict


# -- probe types -----------------------------------------------------------------------------------
class ProbeCount(Assertion):
    type_name = "probe_count"
    fields = {
        "tool": Field({"type": "string"}, required=True),
        "min_calls": Field({"type": "integer", "minimum": 0}, default=1),
        "pattern": Field({"type": "string"}),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.values = dict(values)
        self.ctx = ctx
        self.tool = values["tool"]
        self.min_calls = values["min_calls"]
        if values["pattern"] is not None:
            ctx.compile_regex(values["pattern"], field="pattern")

    def ineffective_reason(self) -> Optional[str]:
        if self.min_calls == 0:
            return "`min_calls: 0` holds for every episode"
        return None


class ProbePolicy(Assertion):
    type_name = "probe_policy"
    fields = {"policy": Field({"type": "object"}, required=True)}

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        for i, rule in enumerate(values["policy"].get("rules", [])):
            if rule.get("bad"):
                ctx.error("E_PROBE_RULE", "this rule is bad", field=f"policy.rules[{i}].bad", hint="remove it")
        if values["policy"].get("warn"):
            ctx.warn("W_PROBE", "just so you know", field="policy.warn")


class ProbeUnit(Assertion):
    type_name = "probe_unit"
    scope = "unit"
    fields = {
        "value": Field({"type": "integer"}, required=True),
        "expect": Field({"enum": ["pass", "fail"]}, default="pass"),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.value = values["value"]
        self.expect = values["expect"]

    def evaluate_unit(self) -> Outcome:
        held = self.value > 0
        if held == (self.expect == "pass"):
            return Outcome.passed(f"value {self.value} met expect {self.expect}")
        return Outcome.failed(f"value {self.value} did not meet expect {self.expect}")


class ProbeBroken(Assertion):
    type_name = "probe_broken"
    fields: Dict[str, Field] = {}

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        raise RuntimeError("boom")


class ProbeMustContain(Assertion):
    type_name = "must_contain"
    fields = {"must_contain": Field({"type": "array", "items": {"type": "string"}}, required=True)}

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.needles = values["must_contain"]

    def ineffective_reason(self) -> Optional[str]:
        return None if self.needles else "`must_contain` is empty"


class ProbeSequenceValid(Assertion):
    type_name = "sequence_valid"
    fields = {"sequence": Field({"type": "array", "items": {"type": "string"}})}

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.sequence = values["sequence"]


class ProbeArgsValid(Assertion):
    type_name = "args_valid"
    fields = {"schema": Field({"type": "object"})}

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.schema = values["schema"]


@pytest.fixture(autouse=True)
def probes() -> Iterator[None]:
    """Only the probe types are registered while a test runs; the real registry is restored after."""
    import spanassert.assertions  # noqa: F401 - register the real ones first, so restoring is complete

    saved_a, saved_e = dict(ASSERTION_TYPES), dict(EXPECTED_TYPES)
    ASSERTION_TYPES.clear()
    EXPECTED_TYPES.clear()
    for cls in (ProbeCount, ProbePolicy, ProbeUnit, ProbeBroken):
        ASSERTION_TYPES[cls.type_name] = cls
    for cls in (ProbeMustContain, ProbeSequenceValid, ProbeArgsValid):
        EXPECTED_TYPES[cls.type_name] = cls
    try:
        yield
    finally:
        ASSERTION_TYPES.clear()
        ASSERTION_TYPES.update(saved_a)
        EXPECTED_TYPES.clear()
        EXPECTED_TYPES.update(saved_e)


def y(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def refused(text: Any, **kwargs: Any) -> List[Diagnostic]:
    with pytest.raises(ConfigError) as exc:
        load_config(text, **kwargs)
    return exc.value.diagnostics


def only(diags: List[Diagnostic], code: str) -> Diagnostic:
    found = [d for d in diags if d.code == code]
    assert len(found) == 1, [d.format() for d in diags]
    return found[0]


VALID = y("""
    version: 1
    suite: payments
    model: gpt-4o
    settings:
      parallel: 4
      timeout_seconds: 30
      max_match_chars: 5000
      x-team: core
    episodes:
      key: gen_ai.conversation.id
      idle_timeout: 5m
      max_open: 100
    mappings:
      - when: {span_name_prefix: "tool.", framework: acme}
        tool_name_from_span: true
        arguments: acme.args
      - when: {acme.kind: agent}
        role: agent
        agent_name: acme.agent
    tests:
      - id: refunds
        match: {agent: support, attributes: {tenant: eu}}
        severity: critical
        mode: shadow
        input: {prompt: "refund order 7", context: "be nice"}
        tags: [refund]
        metadata: {owner: payments}
        expected:
          type: must_contain
          must_contain: [refunded]
        assertions:
          - type: probe_count
            tool: lookup_order
          - type: probe_count
            id: twice
            tool: refund
            min_calls: 2
            evidence: arguments
      - id: plain
        input: "hello"
        assertions:
          - type: probe_count
            tool: x
""")


# -- a valid file ----------------------------------------------------------------------------------
def test_valid_file_loads_into_typed_records(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(VALID, encoding="utf-8")
    config = load_config(path)
    assert isinstance(config, Config)
    assert (config.version, config.suite, config.model, config.source) == (1, "payments", "gpt-4o", str(path))
    assert config.settings.regex_timeout_chars == 5000
    assert config.settings.raw["parallel"] == 4
    assert config.episodes.key == "gen_ai.conversation.id"
    assert config.episodes.idle_timeout == 300.0
    assert config.episodes.max_open == 100
    assert config.episodes.max_calls_per_episode == 10_000  # default kept
    tool_rule, agent_rule = config.mappings
    assert tool_rule.when == {"span_name_prefix": "tool.", "framework": "acme"}
    assert (tool_rule.role, tool_rule.tool_name_from_span, tool_rule.arguments) == ("tool", True, "acme.args")
    assert (agent_rule.role, agent_rule.agent_name) == ("agent", "acme.agent")
    refunds, plain = config.tests
    assert refunds.id == "refunds" and refunds.severity is Severity.CRITICAL and refunds.shadow
    assert refunds.match is not None and refunds.match.agent == ["support"] and refunds.match.service is None
    assert refunds.match.attributes == {"tenant": "eu"}
    assert refunds.input == {"prompt": "refund order 7", "context": "be nice"}
    assert refunds.tags == ["refund"] and refunds.metadata == {"owner": "payments"}
    assert refunds.line == 21
    assert [type(a).__name__ for a in refunds.assertions] == ["ProbeMustContain", "ProbeCount", "ProbeCount"]
    expected, first, second = refunds.assertions
    assert (expected.index, getattr(expected, "origin")) == (0, "expected")
    # each check's index is its position among the test's checks: `expected:` first (issue 19)
    assert (first.index, getattr(first, "origin")) == (1, "assertions")
    assert second.index == 2 and second.name == "twice" and second.evidence == "arguments"
    # Defaults are filled in; an absent field without a default arrives as None.
    assert first.values == {"tool": "lookup_order", "min_calls": 1, "pattern": None, "id": None, "evidence": "none"}
    assert plain.severity is Severity.ERROR and plain.mode == "enforce" and plain.input == "hello"
    assert config.diagnostics == []


def test_build_context_carries_base_dir_settings_and_evidence_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RULES_EVIDENCE_KEY", "s3cret")
    sub = tmp_path / "conf"
    sub.mkdir()
    path = sub / "rules.yaml"
    path.write_text(y("""
        version: 1
        settings: {embedder: "json:dumps", evidence_key_env: RULES_EVIDENCE_KEY}
        tests:
          - id: t
            assertions: [{type: probe_count, tool: a}]
    """), encoding="utf-8")
    config = load_config(path)
    a = config.tests[0].assertions[0]
    import json

    assert a.ctx.base_dir == str(sub.resolve())
    assert a.ctx.evidence_key == b"s3cret"
    assert a.ctx.settings["embedder"] is json.dumps
    assert a.ctx.settings["embedder_ref"] == "json:dumps"
    assert config.settings.evidence_key == b"s3cret"
    assert config.settings.embedder == "json:dumps"


def test_yaml_text_with_a_newline_is_loaded_as_text() -> None:
    config = load_config("version: 1\ntests: [{id: t, assertions: [{type: probe_count, tool: a}]}]\n")
    assert config.tests[0].id == "t" and config.source is None


def test_configversion_is_accepted_as_assay_alias_and_assay_keys_are_ignored() -> None:
    config = load_config(y("""
        configVersion: 1
        thresholds: {min_score: 0.5}
        otel: {anything: [1, 2]}
        x-defaults: &d {tool: shared}
        tests:
          - id: t
            on_error: block
            assertions:
              - {type: probe_count, <<: *d}
    """))
    assert config.tests[0].assertions[0].tool == "shared"


# -- refusals: every problem, positioned ---------------------------------------------------------------
def test_unknown_top_level_key_has_position_path_and_did_you_mean() -> None:
    d = only(refused(y("""
        version: 1
        tets: []
        tests: [{id: t, assertions: [{type: probe_count, tool: a}]}]
    """)), "E_CFG_UNKNOWN_KEY")
    assert (d.line, d.column, d.path) == (2, 1, "tets")
    assert d.hint == "did you mean `tests`?"
    assert d.file is None and d.severity == "error"
    assert "<config>:2:1: error [E_CFG_UNKNOWN_KEY] unknown key `tets`" in d.format()


def test_unknown_assertion_key_names_the_key_path_and_the_close_field() -> None:
    d = only(refused(y("""
        version: 1
        tests:
          - id: t
            assertions:
              - type: probe_count
                tool: a
                min_call: 2
    """)), "E_CFG_UNKNOWN_KEY")
    assert (d.line, d.column, d.path) == (7, 9, "tests[0].assertions[0].min_call")
    assert "did you mean `min_calls`?" == d.hint


def test_duplicate_key_is_refused_where_it_repeats() -> None:
    d = only(refused(y("""
        version: 1
        tests:
          - id: t
            assertions:
              - type: probe_count
                tool: a
                tool: b
    """)), "E_CFG_DUPLICATE_KEY")
    assert (d.line, d.column, d.path) == (7, 9, "tests[0].assertions[0].tool")
    assert "first given at line 6" in d.message


def test_duplicate_test_id_is_refused() -> None:
    d = only(refused(y("""
        version: 1
        tests:
          - id: same
            assertions: [{type: probe_count, tool: a}]
          - id: same
            assertions: [{type: probe_count, tool: b}]
    """)), "E_CFG_DUPLICATE_ID")
    assert (d.line, d.path) == (5, "tests[1].id")
    assert "line 3" in d.message


def test_every_problem_is_reported_in_one_error() -> None:
    diags = refused(y("""
        version: 2
        settings: {paralel: 2}
        tests:
          - id: a
            severity: fatal
            assertions:
              - {type: probe_cont, tool: a}
              - {type: probe_count}
    """))
    assert {d.code for d in diags} >= {"E_CFG_VERSION", "E_CFG_UNKNOWN_KEY", "E_CFG_VALUE", "E_CFG_UNKNOWN_TYPE",
                                       "E_CFG_REQUIRED"}
    lines = [d.line for d in diags]
    assert lines == sorted(lines)
    unknown_type = only(diags, "E_CFG_UNKNOWN_TYPE")
    assert unknown_type.hint.startswith("did you mean `probe_count`?") and unknown_type.path == "tests[0].assertions[0].type"
    severity = only(diags, "E_CFG_VALUE")
    assert "critical, error, warning, info" in severity.message and severity.path == "tests[0].severity"


def test_expect_other_than_pass_or_fail_is_an_error_not_a_default() -> None:
    d = only(refused(y("""
        version: 1
        tests:
          - id: t
            assertions:
              - {type: probe_unit, value: 1, expect: Pass}
    """)), "E_CFG_VALUE")
    assert d.path == "tests[0].assertions[0].expect" and (d.line, d.column) == (5, 46)
    assert "pass, fail" in d.message and "`pass`" in (d.hint or "")


def test_field_type_error_points_into_the_value() -> None:
    d = only(refused(y("""
        version: 1
        tests:
          - id: t
            assertions:
              - type: probe_count
                tool: [not, a, string]
    """)), "E_CFG_TYPE")
    assert d.path == "tests[0].assertions[0].tool" and d.line == 6
    assert "must be a string, not a list" in d.message


def test_build_context_errors_are_positioned_at_the_nested_field() -> None:
    diags = refused(y("""
        version: 1
        tests:
          - id: t
            assertions:
              - type: probe_policy
                policy:
                  rules:
                    - ok: 1
                    - bad: true
              - type: probe_count
                tool: a
                pattern: "("
    """))
    rule = only(diags, "E_PROBE_RULE")
    assert (rule.line, rule.column, rule.path) == (9, 20, "tests[0].assertions[0].policy.rules[1].bad")
    assert rule.message == "probe_policy: this rule is bad" and rule.hint == "remove it"
    regex = only(diags, "E_CFG_REGEX")
    assert (regex.line, regex.path) == (12, "tests[0].assertions[1].pattern")


def test_build_context_warnings_are_kept_on_a_loaded_config() -> None:
    config = load_config(y("""
        version: 1
        tests:
          - id: t
            assertions: [{type: probe_policy, policy: {warn: true}}]
    """))
    (d,) = config.diagnostics
    assert (d.code, d.severity, d.path) == ("W_PROBE", "warning", "tests[0].assertions[0].policy.warn")


def test_an_assertion_type_that_raises_becomes_a_diagnostic() -> None:
    d = only(refused("version: 1\ntests: [{id: t, assertions: [{type: probe_broken}]}]\n"), "E_ASSERT_BUILD")
    assert "RuntimeError: boom" in d.message


class ProbeBadCheck(ProbeCount):
    type_name = "probe_bad_check"

    def ineffective_reason(self) -> Optional[str]:
        raise ValueError("nope")


class ProbeBadUnit(ProbeUnit):
    type_name = "probe_bad_unit"

    def evaluate_unit(self) -> Outcome:
        raise KeyError("x")


def test_each_call_into_a_types_own_code_that_raises_is_one_positioned_diagnostic() -> None:
    # Building it, its effectiveness check and its unit-test form: each fenced alike (one fence in
    # config/build.py), each message naming what was being done and the exception.
    for cls in (ProbeBadCheck, ProbeBadUnit):
        ASSERTION_TYPES[cls.type_name] = cls
    cases = {
        "{type: probe_broken}": ("`probe_broken` could not be built: RuntimeError: boom",
                                 "this is a bug in the assertion type; please report it"),
        "{type: probe_bad_check, tool: a}": ("`probe_bad_check` failed its effectiveness check: ValueError: nope",
                                             None),
        "{type: probe_bad_unit, value: 1}": ("test `t`: unit-test form `probe_bad_unit` raised KeyError: 'x'", None),
    }
    for entry, (message, hint) in cases.items():
        d = only(refused(f"version: 1\ntests: [{{id: t, assertions: [{entry}]}}]\n"), "E_ASSERT_BUILD")
        assert (d.message, d.hint, d.line) == (message, hint, 2), entry


# -- ineffective and vacuous ---------------------------------------------------------------------------
INEFFECTIVE = y("""
    version: 1
    tests:
      - id: never_fails
        assertions:
          - {type: probe_count, tool: a}
          - {type: probe_count, tool: b, min_calls: 0}
""")


def test_an_assertion_that_cannot_fail_is_refused_by_default() -> None:
    d = only(refused(INEFFECTIVE), "E_ASSERT_INEFFECTIVE")
    assert d.severity == "error" and d.path == "tests[0].assertions[1]" and d.line == 6
    for part in ("never_fails", "assertion #1", "probe_count", "`min_calls: 0` holds for every episode"):
        assert part in d.message
    assert "--allow-ineffective-assertions" in (d.hint or "")


def test_allow_ineffective_keeps_the_assertion_with_a_warning() -> None:
    config = load_config(INEFFECTIVE, allow_ineffective_assertions=True)
    assert len(config.tests[0].assertions) == 2
    (d,) = config.diagnostics
    assert (d.code, d.severity) == ("E_ASSERT_INEFFECTIVE", "warning")


def test_a_test_with_no_checks_loads_with_a_vacuous_warning() -> None:
    config = load_config("version: 1\ntests:\n  - id: nothing\n")
    (d,) = config.diagnostics
    assert (d.code, d.severity, d.path, d.line) == ("W_CFG_VACUOUS_EXPECTED", "warning", "tests[0]", 3)
    assert "nothing" in d.message


# -- unit-test forms -----------------------------------------------------------------------------------
def test_unit_test_forms_are_evaluated_at_load() -> None:
    config = load_config(y("""
        version: 1
        tests:
          - id: u
            assertions:
              - {type: probe_unit, value: 1}
              - {type: probe_unit, value: 0, expect: fail}
              - {type: probe_unit, value: 0}
    """))
    verdicts = [(a.index, o.verdict) for a, o in config.tests[0].unit_results]
    assert verdicts == [(0, Verdict.PASSED), (1, Verdict.PASSED), (2, Verdict.FAILED)]
    ((test, a, outcome),) = config.unit_failures
    assert test.id == "u" and a.index == 2 and "did not meet expect pass" in outcome.message


# -- expected: -----------------------------------------------------------------------------------------
def _expected(block: str, **kwargs: Any) -> Config:
    return load_config("version: 1\ntests:\n  - id: t\n    expected:\n" + textwrap.indent(y(block), "      "), **kwargs)


def _expected_refused(block: str) -> List[Diagnostic]:
    return refused("version: 1\ntests:\n  - id: t\n    expected:\n" + textwrap.indent(y(block), "      "))


def test_tagged_expected_is_built_first_with_origin_expected() -> None:
    a = _expected("type: must_contain\nmust_contain: [Tokyo]\n").tests[0].assertions[0]
    assert isinstance(a, ProbeMustContain) and a.needles == ["Tokyo"] and getattr(a, "origin") == "expected"


@pytest.mark.parametrize("block, cls, attr, value", [
    ('must_contain: "Tokyo"\n', ProbeMustContain, "needles", ["Tokyo"]),
    ("must_contain: [a, b]\n", ProbeMustContain, "needles", ["a", "b"]),
    ('- must_contain: "Tokyo"\n', ProbeMustContain, "needles", ["Tokyo"]),
    ("sequence: [a, b]\n", ProbeSequenceValid, "sequence", ["a", "b"]),
    ("type: sequence\nsequence: []\n", ProbeSequenceValid, "sequence", []),
    ("schema: {required: [x]}\n", ProbeArgsValid, "schema", {"required": ["x"]}),
])
def test_legacy_expected_forms_build_the_tagged_type(block: str, cls: type, attr: str, value: Any) -> None:
    a = _expected(block).tests[0].assertions[0]
    assert isinstance(a, cls) and getattr(a, attr) == value


def test_two_entry_expected_list_is_refused_with_the_count() -> None:
    d = only(_expected_refused("- must_contain: a\n- must_contain: b\n"), "E_CFG_EXPECTED_MULTIPLE")
    assert "2 entries" in d.message and d.path == "tests[0].expected"
    assert "separate tests" in (d.hint or "") and "assertions:" in (d.hint or "")


@pytest.mark.parametrize("block, code, needle", [
    ("[]\n", "E_CFG_EXPECTED", "empty list"),
    ("null\n", "E_CFG_EXPECTED", "null"),
    ("must_contains: [a]\n", "E_CFG_EXPECTED", "found key(s) `must_contains`"),
    ("$ref: other.yaml\n", "E_CFG_LEGACY_REF", "version 1 does not read"),
    ("type: must_contian\nmust_contain: [a]\n", "E_CFG_UNKNOWN_TYPE", "must_contian"),
    ("type: must_contain\nmust_contain: []\n", "E_ASSERT_INEFFECTIVE", "`must_contain` is empty"),
    ("42\n", "E_CFG_EXPECTED", "not an integer"),
])
def test_bad_expected_blocks_are_refused(block: str, code: str, needle: str) -> None:
    d = only(_expected_refused(block), code)
    assert needle in d.message, d.format()


def test_unrecognised_expected_block_lists_the_accepted_forms() -> None:
    d = only(_expected_refused("must_contains: [a]\n"), "E_CFG_EXPECTED")
    assert "did you mean `must_contain`?" in (d.hint or "")
    assert "`must_contain`, `sequence`, `schema`" in (d.hint or "")


# -- top level, settings, episodes, mappings ----------------------------------------------------------------
@pytest.mark.parametrize("text, code, path, needle", [
    ("tests: [{id: t}]\n", "E_CFG_VERSION", "", "no `version`"),
    ("version: 2\ntests: [{id: t}]\n", "E_CFG_VERSION", "version", "must be 1"),
    ("version: '1'\ntests: [{id: t}]\n", "E_CFG_VERSION", "version", "must be 1"),
    ("version: 0\ntests: [{id: t}]\n", "E_CFG_VERSION", "version", "legacy"),
    ("version: 1\nconfigVersion: 1\ntests: [{id: t}]\n", "E_CFG_VERSION", "configVersion", "both"),
    ("version: 1\n", "E_CFG_REQUIRED", "", "`tests`"),
    ("version: 1\ntests: []\n", "E_CFG_VALUE", "tests", "empty"),
    ("version: 1\ntests: {id: t}\n", "E_CFG_TYPE", "tests", "must be a list"),
    ("version: 1\npolicies: []\ntests: [{id: t}]\n", "E_CFG_LEGACY_POLICIES", "policies", "Assay v0"),
    ("version: 1\nsettings: {paralel: 2}\ntests: [{id: t}]\n", "E_CFG_UNKNOWN_KEY", "settings.paralel", "paralel"),
    ("version: 1\nsettings: {embedder: 'no_such_module_xyz:embed'}\ntests: [{id: t}]\n", "E_CFG_EMBEDDER",
     "settings.embedder", "no_such_module_xyz"),
    ("version: 1\nsettings: {embedder: 'json:no_such_fn'}\ntests: [{id: t}]\n", "E_CFG_EMBEDDER",
     "settings.embedder", "no_such_fn"),
    ("version: 1\nsettings: {embedder: 'json:__doc__'}\ntests: [{id: t}]\n", "E_CFG_EMBEDDER",
     "settings.embedder", "not callable"),
    ("version: 1\nsettings: {embedder: 'not a ref'}\ntests: [{id: t}]\n", "E_CFG_VALUE", "settings.embedder",
     "pattern"),
    ("version: 1\nsettings: {max_match_chars: 0}\ntests: [{id: t}]\n", "E_CFG_VALUE", "settings.max_match_chars",
     "minimum"),
    ("version: 1\nepisodes: {idle_timeout: 10 minutes}\ntests: [{id: t}]\n", "E_CFG_VALUE",
     "episodes.idle_timeout", ""),
    ("version: 1\nepisodes: {idle_timeout: 0s}\ntests: [{id: t}]\n", "E_CFG_VALUE", "episodes.idle_timeout",
     "greater than 0"),
    ("version: 1\nepisodes: {max_open: true}\ntests: [{id: t}]\n", "E_CFG_TYPE", "episodes.max_open", "integer"),
    ("version: 1\nepisodes: {key: ''}\ntests: [{id: t}]\n", "E_CFG_VALUE", "episodes.key", "empty"),
    ("version: 1\nmappings: [{when: {}, tool_name: a}]\ntests: [{id: t}]\n", "E_CFG_VALUE", "mappings[0].when",
     "empty"),
    ("version: 1\nmappings: [{when: {a: 1}}]\ntests: [{id: t}]\n", "E_CFG_REQUIRED", "mappings[0]", "tool name"),
    ("version: 1\nmappings: [{when: {a: 1}, role: tools, tool_name: a}]\ntests: [{id: t}]\n", "E_CFG_VALUE",
     "mappings[0].role", "tool, agent, step"),
    ("version: 1\nmappings: [{when: {a: [1]}, tool_name: a}]\ntests: [{id: t}]\n", "E_CFG_TYPE",
     "mappings[0].when.a", "not a list"),
    ("version: 1\ntests: [{id: t, mode: audit}]\n", "E_CFG_VALUE", "tests[0].mode", "enforce, shadow"),
    ("version: 1\ntests: [{id: t, on_error: ignore}]\n", "E_CFG_VALUE", "tests[0].on_error", "block, allow"),
    ("version: 1\ntests: [{id: t, input: {promt: x}}]\n", "E_CFG_VALUE", "tests[0].input", ""),
    ("version: 1\ntests: [{id: t, match: {agents: a}}]\n", "E_CFG_UNKNOWN_KEY", "tests[0].match.agents", "agents"),
    ("version: 1\ntests: [{id: t, match: {agent: []}}]\n", "E_CFG_VALUE", "tests[0].match.agent", ""),
    ("version: 1\ntests: [{id: 7}]\n", "E_CFG_TYPE", "tests[0].id", "string"),
    ("version: 1\ntests: [{assertions: []}]\n", "E_CFG_REQUIRED", "tests[0]", "`id`"),
    ("version: 1\ntests: [{id: t, assertions: [{tool: a}]}]\n", "E_CFG_REQUIRED", "tests[0].assertions[0]",
     "no `type`"),
    ("version: 1\ntests: [{id: t, assertions: [[]]}]\n", "E_CFG_TYPE", "tests[0].assertions[0]", "mapping"),
    ("version: 1\ntests: [{id: t, assertions: {type: probe_count}}]\n", "E_CFG_TYPE", "tests[0].assertions",
     "must be a list"),
    ("version: 1\ntests: [{id: t, assertions: }]\n", "E_CFG_TYPE", "tests[0].assertions", "not null"),
    ("[1, 2]\n", "E_CFG_TYPE", "", "must be a mapping"),
    ("# nothing here\n", "E_CFG_EMPTY", "", "empty"),
])
def test_structural_refusals(text: str, code: str, path: str, needle: str) -> None:
    d = only(refused(text), code)
    assert d.path == path, d.format()
    assert needle in d.message, d.format()
    assert d.line is not None or code in ("E_CFG_EMPTY",), d.format()


def test_extension_keys_are_exempt_at_top_level_and_in_settings() -> None:
    load_config("version: 1\nx-note: hi\n_private: 1\nsettings: {x-a: 1, _b: 2, seed: 3}\n"
                "tests: [{id: t, assertions: [{type: probe_count, tool: a}]}]\n")


def test_unset_evidence_key_variable_is_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPANASSERT_TEST_UNSET_KEY", raising=False)
    config = load_config("version: 1\nsettings: {evidence_key_env: SPANASSERT_TEST_UNSET_KEY}\n"
                         "tests: [{id: t, assertions: [{type: probe_count, tool: a}]}]\n")
    (d,) = config.diagnostics
    assert d.code == "W_CFG_EVIDENCE_KEY_UNSET" and config.settings.evidence_key is None


@pytest.mark.parametrize("value, seconds", [(2, 2.0), (0.5, 0.5), ("500ms", 0.5), ("30s", 30.0), ("5m", 300.0),
                                            ("1h", 3600.0)])
def test_idle_timeout_accepts_seconds_and_durations(value: Any, seconds: float) -> None:
    config = load_config(f"version: 1\nepisodes: {{idle_timeout: {value}}}\n"
                         "tests: [{id: t, assertions: [{type: probe_count, tool: a}]}]\n")
    assert config.episodes.idle_timeout == seconds


# -- reading and YAML safety ---------------------------------------------------------------------------
def test_missing_path_is_reported(tmp_path: Path) -> None:
    d = only(refused(str(tmp_path / "nope.yaml")), "E_PATH_NOT_FOUND")
    assert "does not exist" in d.message and d.file == str(tmp_path / "nope.yaml")
    assert "newline" in (d.hint or "")
    assert "directory" in only(refused(tmp_path), "E_PATH_NOT_FOUND").message


def test_file_over_one_mebibyte_is_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"version: 1\n# " + b"x" * (1 << 20) + b"\n: : : [\n")
    d = only(refused(path), "E_CFG_TOO_LARGE")
    assert "1 MiB" in d.message
    assert only(refused("version: 1\n#" + "x" * (1 << 20)), "E_CFG_TOO_LARGE")


def test_non_utf8_file_names_the_byte_offset(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("version: 1\ntests:\n  - id: caf".encode() + b"\xe9\n")
    d = only(refused(path), "E_CFG_ENCODING")
    assert "byte offset 29" in d.message and "0xe9" in d.message
    assert (d.line, d.column) == (3, 12) and d.file == str(path)


def test_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbfversion: 1\ntests: [{id: t, assertions: [{type: probe_count, tool: a}]}]\n")
    assert load_config(path).tests[0].id == "t"


def test_yaml_syntax_error_has_line_and_column() -> None:
    d = only(refused("version: 1\ntests: [{id: t\n"), "E_CFG_PARSE")
    assert d.line == 3 and d.column is not None
    assert d.message.startswith("YAML syntax error")


@pytest.mark.parametrize("text, needle", [
    ("version: 1\n---\nversion: 1\n", "single document"),
    ("version: 1\ntests: *nowhere\n", "undefined alias"),
    ("version: 1\ntests: !python/object {}\n", "not supported"),
    ("version: 1\n\ttests: []\n", "tab"),
    ("version: 1\nx: \"\x07\"\n", "not allowed"),
])
def test_other_yaml_problems_are_parse_errors(text: str, needle: str) -> None:
    d = only(refused(text), "E_CFG_PARSE")
    assert needle in (d.message + " " + (d.hint or "")), d.format()
    assert d.line is not None


def test_alias_bomb_is_refused() -> None:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 9):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 9)}]")
    d = only(refused("\n".join(lines) + "\n"), "E_CFG_ALIAS")
    assert "alias bomb" in d.message and d.line is not None


def test_more_than_a_hundred_aliases_are_refused() -> None:
    text = "base: &b 1\nitems: [" + ", ".join(["*b"] * 101) + "]\n"
    d = only(refused(text), "E_CFG_ALIAS")
    assert "100" in d.message


def test_recursive_alias_is_refused_not_a_hang() -> None:
    diags = refused("version: 1\nloop: &l [*l]\ntests: [{id: t}]\n")
    assert {d.code for d in diags} & {"E_CFG_TOO_DEEP", "E_CFG_ALIAS"}


@pytest.mark.parametrize("opener, closer", [("[", "]"), ("{a: ", "}")])
def test_deep_nesting_is_refused(opener: str, closer: str) -> None:
    text = "version: 1\nx: " + opener * 65 + "1" + closer * 65 + "\n"
    d = only(refused(text), "E_CFG_TOO_DEEP")
    assert d.line == 2 and "64" in d.message
    # Far deeper than Python's stack: still a diagnostic, never a RecursionError.
    only(refused("x: " + "[" * 50_000 + "\n"), "E_CFG_TOO_DEEP")


def test_nesting_at_the_bound_is_accepted() -> None:
    nested = "[" * 62 + "1" + "]" * 62  # root mapping + tests list item ... stay within 64
    config = load_config("version: 1\nx-deep: " + nested + "\n"
                         "tests: [{id: t, assertions: [{type: probe_count, tool: a}]}]\n")
    assert config.tests[0].id == "t"


def test_non_string_keys_keep_the_text_written() -> None:
    d = only(refused("version: 1\non: 1\ntests: [{id: t, assertions: [{type: probe_count, tool: a}]}]\n"),
             "E_CFG_UNKNOWN_KEY")
    assert d.message == "unknown key `on` in the rules file"


def test_merge_keys_let_explicit_keys_win() -> None:
    config = load_config(y("""
        version: 1
        x-base: &base {type: probe_count, tool: base, min_calls: 3}
        tests:
          - id: t
            assertions:
              - <<: *base
                tool: mine
    """))
    a = config.tests[0].assertions[0]
    assert (a.tool, a.min_calls) == ("mine", 3)


def test_diagnostic_keeps_file_for_path_input(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text("version: 1\ntests: [{id: t, bogus: 1}]\n", encoding="utf-8")
    d = only(refused(str(path)), "E_CFG_UNKNOWN_KEY")
    assert d.file == str(path) and d.format().startswith(f"{path}:2:17: error [E_CFG_UNKNOWN_KEY]")
    assert os.path.isabs(d.file)


def test_duplicate_keys_are_reported_together_with_the_other_problems() -> None:
    diags = refused(y("""
        version: 1
        version: 1
        tests:
          - id: t
            assertions:
              - {type: probe_count, tool: a, tool: b, min_call: 1}
    """))
    assert [(d.code, d.line) for d in diags] == [("E_CFG_DUPLICATE_KEY", 2), ("E_CFG_DUPLICATE_KEY", 6),
                                                  ("E_CFG_UNKNOWN_KEY", 6)]


SOURCE_CASES = [
    "version: 1\ntests: [{id: t\n",
    "version: 1\n---\nversion: 1\n",
    "version: 1\ntests: *nowhere\n",
    "version: 1\n\ttests: []\n",
    "version: 1\nx: \"\x07\"\n",
    "version: 1\nx: " + "[" * 70 + "]" * 70 + "\n",
    "x: " + "{a: " * 5000 + "\n",
    "base: &b 1\nitems: [" + ", ".join(["*b"] * 101) + "]\n",
    "version: 1\nversion: 1\ntests: [{id: t, assertions: [{type: probe_count, tool: a}]}]\n",
    "version: 1\ntests: !custom []\n",
    "version: 1\nx: !!binary aGk=\ntests: [{id: t, assertions: [{type: probe_count, tool: a}]}]\n",
]


@pytest.mark.parametrize("text", SOURCE_CASES)
def test_libyaml_and_pure_python_parsers_agree(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from spanassert.config import source

    def outcome() -> Any:
        try:
            load_config(text)
        except ConfigError as exc:
            return sorted((d.code, d.line) for d in exc.diagnostics)
        return "loaded"

    first = outcome()
    python_only = [source._PythonLoader]
    monkeypatch.setattr(source, "_LOADERS", python_only)
    second = outcome()
    assert first != "loaded"
    assert first == second  # same codes on the same lines
