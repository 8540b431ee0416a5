"""Every refusal of a rules file, with the real assertion types: what is refused, with which code,
where (line, column, key path) and what the message says. Each row is one bad file."""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any, FrozenSet, List, NamedTuple, Optional, Tuple, Union

import pytest

from spanassert.config import ConfigError, load_config
from spanassert.core.model import Diagnostic


class Refusal(NamedTuple):
    name: str
    text: Union[str, bytes]
    codes: FrozenSet[str]  # any of these codes is the right refusal
    path: Optional[str]  # key path of the diagnostic (None: not checked)
    needles: Tuple[str, ...]  # substrings of message + hint
    position: Optional[Tuple[int, int]] = None  # (line, column) when pinned


def _test(body: str) -> str:
    return "version: 1\ntests:\n  - id: t\n" + textwrap.indent(textwrap.dedent(body).lstrip("\n"), "    ")


INEFFECTIVE = frozenset({"E_ASSERT_INEFFECTIVE"})
# Assay refuses an explicitly vacuous `expected:` block as a config error of its own (it cannot be
# overridden by --allow-ineffective-assertions); either code is a correct refusal.
VACUOUS = frozenset({"E_ASSERT_INEFFECTIVE", "E_CFG_VACUOUS"})

ALIAS_BOMB = "\n".join(
    ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
) + "\n"

REFUSALS: List[Refusal] = [
    Refusal("unknown key", _test("""
        assertions:
          - type: trace_must_call_tool
            tool: search
            min_call: 2
        """), frozenset({"E_CFG_UNKNOWN_KEY"}), "tests[0].assertions[0].min_call",
        ("unknown key `min_call`", "did you mean `min_calls`?"), (7, 9)),
    Refusal("unknown max_calls key (Assay's typo case)", _test("""
        assertions:
          - {type: trace_must_call_tool, tool: search, max_calls: 0}
        """), frozenset({"E_CFG_UNKNOWN_KEY"}), "tests[0].assertions[0].max_calls", ("max_calls",)),
    Refusal("unknown top-level key", "version: 1\ntest:\n  - id: t\n", frozenset({"E_CFG_UNKNOWN_KEY"}), "test",
            ("did you mean `tests`?",), (2, 1)),
    Refusal("duplicate key", _test("""
        assertions:
          - type: trace_must_not_call_tool
            tool: drop_table
            tool: read_table
        """), frozenset({"E_CFG_DUPLICATE_KEY"}), "tests[0].assertions[0].tool", ("duplicate key `tool`",),
        (7, 9)),
    Refusal("duplicate test id",
            "version: 1\ntests:\n  - id: t\n    assertions: [{type: trace_max_steps, max: 3}]\n"
            "  - id: t\n    assertions: [{type: trace_max_steps, max: 4}]\n",
            frozenset({"E_CFG_DUPLICATE_ID"}), "tests[1].id", ("`t`", "line 3"), (5, 9)),
    Refusal("expect: Pass", _test("""
        assertions:
          - type: tool_blocklist
            test_tool_calls: [read_file, delete_database]
            policy: {blocked: [delete_database]}
            expect: Pass
        """), frozenset({"E_CFG_VALUE"}), "tests[0].assertions[0].expect", ("pass", "fail")),
    Refusal("two-entry expected list", _test("""
        expected:
          - must_contain: Tokyo
          - must_contain: Paris
        """), frozenset({"E_CFG_EXPECTED_MULTIPLE"}), "tests[0].expected",
        ("2 entries", "separate tests", "assertions:")),
    Refusal("min_calls: 0", _test("""
        assertions:
          - {type: trace_must_call_tool, tool: search, min_calls: 0}
        """), INEFFECTIVE, "tests[0].assertions[0]",
        ("`t`", "#0", "trace_must_call_tool", "min_calls", "--allow-ineffective-assertions")),
    Refusal("empty tool name", _test("""
        assertions:
          - {type: trace_must_not_call_tool, tool: ""}
        """), frozenset({"E_ASSERT_INEFFECTIVE", "E_CFG_VALUE"}), "tests[0].assertions[0]", ("tool",)),
    Refusal("empty sequence with allow_other_tools: true", _test("""
        assertions:
          - {type: trace_tool_sequence, sequence: [], allow_other_tools: true}
        """), INEFFECTIVE, "tests[0].assertions[0]", ("trace_tool_sequence", "sequence")),
    Refusal("empty blocked (expected)", _test("""
        expected: {type: tool_blocklist, blocked: []}
        """), VACUOUS, None, ("blocked",)),
    Refusal("absent blocked (expected)", _test("""
        expected: {type: tool_blocklist}
        """), frozenset({"E_CFG_REQUIRED"}), "tests[0].expected", ("blocked",)),
    Refusal("empty blocked (unit form)", _test("""
        assertions:
          - {type: tool_blocklist, test_tool_calls: [a], policy: {blocked: []}, expect: pass}
        """), VACUOUS, None, ("blocked",)),
    Refusal("absent blocked (unit form)", _test("""
        assertions:
          - {type: tool_blocklist, test_tool_calls: [a], policy: {}, expect: pass}
        """), VACUOUS | {"E_CFG_REQUIRED"}, None, ("blocked",)),
    Refusal("policy without usable regex", _test("""
        assertions:
          - type: sequence_valid
            test_trace_raw: [{tool: submit_payment}]
            policy: {}
            expect: pass
        """), VACUOUS | {"E_CFG_REQUIRED"}, None, ("regex",)),
    Refusal("policy with empty regex", _test("""
        assertions:
          - type: sequence_valid
            test_trace_raw: [{tool: submit_payment}]
            policy: {regex: ""}
            expect: pass
        """), VACUOUS | {"E_CFG_VALUE"}, None, ("regex",)),
    Refusal("JSON Schema that constrains nothing (expected args_valid)", _test("""
        expected:
          type: args_valid
          schema: {transfer_funds: {description: anything goes}}
        """), VACUOUS, None, ("schema",)),
    Refusal("JSON Schema that constrains nothing (trace_args_valid)", _test("""
        assertions:
          - {type: trace_args_valid, tool: transfer_funds, schema: {}}
        """), VACUOUS, None, ("schema",)),
    Refusal("JSON Schema that constrains nothing (unit args_valid)", _test("""
        assertions:
          - {type: args_valid, tool: transfer_funds, test_args: {amount: 1}, policy: {schema: {}}, expect: pass}
        """), VACUOUS, None, ("JSON Schema",)),
    Refusal("before with first == then", _test("""
        expected:
          type: sequence_valid
          rules:
            - {type: before, first: auth, then: auth}
        """), VACUOUS | {"E_CFG_RULE"}, None, ("cannot constrain",)),
    Refusal("empty must_contain", _test("""
        expected: {type: must_contain, must_contain: []}
        """), VACUOUS, "tests[0].expected.must_contain", ("must_contain", "pass for any response")),
    Refusal("rules: [] without sequence", _test("""
        expected: {type: sequence_valid, rules: []}
        """), VACUOUS, "tests[0].expected.rules", ("rules",)),
    Refusal("test_trace instead of test_trace_raw", _test("""
        assertions:
          - type: sequence_valid
            test_trace: [{tool: a}]
            policy: {regex: '^a$'}
            expect: pass
        """), frozenset({"E_CFG_UNKNOWN_KEY", "E_CFG_VALUE", "E_CFG_UNIT", "E_ASSERT_INEFFECTIVE"}),
        "tests[0].assertions[0].test_trace", ("test_trace_raw",)),
    # (without settings.embedder it loads: it is judged where the spans carry precomputed embeddings)
    Refusal("semantic_similarity_to with an embedder that cannot be imported",
            "version: 1\nsettings: {embedder: 'no_such_module_xyz:embed'}\n" + _test("""
        expected: {type: semantic_similarity_to, semantic_similarity_to: "the refund was issued"}
        """).replace("version: 1\n", "", 1), frozenset({"E_CFG_EMBEDDER"}), None, ("embedder",)),
    Refusal("top-level policies (Assay v0)", "version: 1\npolicies: [x]\ntests:\n  - id: t\n",
            frozenset({"E_CFG_LEGACY_POLICIES"}), "policies", ("assertions:",), (2, 1)),
    Refusal("$ref expected (legacy)", _test("""
        expected: {$ref: checks.yaml}
        """), frozenset({"E_CFG_LEGACY_REF"}), None, ("version 1",)),
    Refusal("expected: null", _test("""
        expected: null
        """), frozenset({"E_CFG_EXPECTED"}), "tests[0].expected", ("null",)),
    Refusal("unrecognised expected block", _test("""
        expected: {must_contains: [Tokyo]}
        """), frozenset({"E_CFG_EXPECTED"}), "tests[0].expected",
        ("must_contains", "did you mean `must_contain`?", "legacy")),
    Refusal("expected type name used as a key", _test("""
        expected: {tool_blocklist: {blocked: [delete_database]}}
        """), frozenset({"E_CFG_EXPECTED"}), "tests[0].expected",
        ("`type: tool_blocklist` with its fields beside it",)),
    Refusal("unknown severity spelling", _test("""
        severity: high
        assertions: [{type: trace_max_steps, max: 3}]
        """), frozenset({"E_CFG_VALUE"}), "tests[0].severity", ("critical, error, warning, info",)),
    Refusal("unknown assertion type", _test("""
        assertions: [{type: trace_must_call, tool: a}]
        """), frozenset({"E_CFG_UNKNOWN_TYPE"}), "tests[0].assertions[0].type",
        ("trace_must_call", "did you mean `trace_must_call_tool`?")),
    Refusal("over 1 MiB", "version: 1\n# " + "x" * (1 << 20) + "\n", frozenset({"E_CFG_TOO_LARGE"}), "", ("1 MiB",)),
    Refusal("alias bomb", ALIAS_BOMB, frozenset({"E_CFG_ALIAS"}), "", ("alias",)),
    Refusal("non-UTF-8", b"version: 1\ntests:\n  - id: caf\xe9\n", frozenset({"E_CFG_ENCODING"}), "",
            ("byte offset 29",), (3, 12)),
    Refusal("deep nesting", "version: 1\nx-deep: " + "[" * 80 + "]" * 80 + "\n", frozenset({"E_CFG_TOO_DEEP"}), "",
            ("64",), (2, 72)),
    Refusal("YAML syntax error", "version: 1\ntests: [\n", frozenset({"E_CFG_PARSE"}), "", ("YAML",), (3, 1)),
    # review11: a NaN bound loaded and never failed a value (`amount: 5000` passed `maximum: .nan`).
    Refusal("NaN bound in a schema", _test("""
        assertions:
          - type: trace_args_valid
            tool: refund
            schema: {type: object, properties: {amount: {type: number, maximum: .nan}}}
        """), frozenset({"E_CFG_SCHEMA"}), "tests[0].assertions[0].schema.properties.amount.maximum",
        ("NaN", "never fails a value")),
    # fuzz8: found by fuzzing rules files (hostile values in valid files).
    Refusal("a mapping as a test's severity (was E_INTERNAL: unhashable type)", _test("""
        severity: {}
        assertions: [{type: trace_max_steps, max: 1}]
        """), frozenset({"E_CFG_VALUE"}), "tests[0].severity", ("must be one of critical, error, warning, info",
                                                                  "use one of: `critical`")),
    Refusal("a property named `type` whose schema is a string", _test("""
        assertions:
          - {type: trace_args_valid, tool: x, schema: {type: object, properties: {type: string}}}
        """), frozenset({"E_CFG_SCHEMA"}), "tests[0].assertions[0].schema.properties.type",
        ("`type` must be an object or boolean, not str 'string'",)),
    Refusal("a 5000-character value in a schema is quoted briefly", _test("""
        assertions:
          - {type: trace_args_valid, tool: x, schema: {type: object, required: %s}}
        """ % ("a" * 5000)), frozenset({"E_CFG_SCHEMA"}), "tests[0].assertions[0].schema.required",
        ("must be an array, not str 'aaaa", "… (5002 characters)")),
    Refusal("a 5000-character assertion type is quoted briefly", _test("""
        assertions:
          - {type: %s}
        """ % ("a" * 5000)), frozenset({"E_CFG_UNKNOWN_TYPE"}), "tests[0].assertions[0].type",
        ("unknown assertion type `%s…`" % ("a" * 59),)),
    Refusal("a 5000-character test id (every message naming the test was 5,500 characters)",
            "version: 1\ntests:\n  - id: %s\n    assertions: [{type: trace_max_steps, max: 1}]\n" % ("a" * 5000),
            frozenset({"E_CFG_VALUE"}), "tests[0].id", ("is 5000 characters long; at most 200", "shorten it"), (3, 9)),
    Refusal("a number where text is wanted says to quote it", _test("""
        assertions:
          - {type: trace_must_call_tool, tool: 1.0}
        """), frozenset({"E_CFG_TYPE"}), "tests[0].assertions[0].tool",
        ("must be a string, not a number", "quote it")),
    # session 9: YAML 1.1 (this loader) and YAML 1.2 (Assay's, editors' schemas) read these as different
    # values; `1:30` loaded as 90 and `010` as 8 without a word.
    Refusal("a base-60 number", _test("""
        assertions:
          - {type: trace_max_steps, max: 1:30}
        """), frozenset({"E_CFG_PARSE"}), None, ("`1:30` is a base-60 number in YAML 1.1 (read here as 90)",
                                                 "the text \"1:30\" in YAML 1.2", "write the number itself (`90`)"),
        (5, 38)),
    Refusal("a leading-zero number", _test("""
        assertions:
          - {type: trace_max_steps, max: 010}
        """), frozenset({"E_CFG_PARSE"}), None, ("YAML 1.1 reads it as octal (8) and YAML 1.2 as decimal (10)",
                                                 "write `10` or `8`"), (5, 38)),
    Refusal("text in YAML 1.1 that YAML 1.2 reads as a number (a rule matching 1000 never matched)", _test("""
        assertions:
          - {type: trace_must_not_call_tool, tool: refund, args_match: {amount: 1e3}}
        """), frozenset({"E_CFG_PARSE"}), None, ("`1e3` is text in YAML 1.1", "the number 1000.0 in YAML 1.2",
                                                 "write the number as YAML 1.1 reads one (`1000.0`)", "quote it"),
        (5, 77)),
    Refusal("yes/no/on/off: booleans in YAML 1.1, text in YAML 1.2 (country: no matched false, never 'no')", _test("""
        assertions:
          - {type: trace_must_not_call_tool, tool: ship, args_match: {country: no}}
        """), frozenset({"E_CFG_PARSE"}), None, ("`no` is the boolean false in YAML 1.1",
                                                 "the text \"no\" in YAML 1.2", "write `false`", "quote it"), None),
    Refusal("a quoted number where an integer is wanted says to drop the quotes", _test("""
        assertions:
          - {type: trace_max_steps, max: "3"}
        """), frozenset({"E_CFG_TYPE"}), "tests[0].assertions[0].max",
        ("must be an integer, not a string", "a whole number, without quotes")),
]


def _diagnostics(text: Union[str, bytes], tmp_path: Path) -> List[Diagnostic]:
    path = tmp_path / "rules.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    return exc.value.diagnostics


@pytest.mark.parametrize("case", REFUSALS, ids=[r.name for r in REFUSALS])
def test_refusal(case: Refusal, tmp_path: Path) -> None:
    diags = _diagnostics(case.text, tmp_path)
    assert not [d.format() for d in diags if d.code == "E_INTERNAL"]  # a refusal is never a bug's
    assert all(len(d.format()) < 2000 for d in diags)  # bounded: a value is quoted briefly
    errors = [d for d in diags if d.severity == "error"]
    matching = [d for d in errors if d.code in case.codes]
    assert matching, "expected one of %s, got:\n%s" % (sorted(case.codes), "\n".join(d.format() for d in diags))
    d = matching[0]
    if case.path is not None:
        assert d.path == case.path or d.path.startswith(case.path + "."), d.format()
    text = d.message + " " + (d.hint or "")
    for needle in case.needles:
        assert needle in text, d.format()
    assert d.file == str(tmp_path / "rules.yaml")
    if case.position is not None:
        assert (d.line, d.column) == case.position, d.format()
    elif case.path:
        assert d.line is not None, d.format()


def test_ineffective_assertion_is_kept_as_a_warning_when_allowed(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(_test("""
        assertions:
          - {type: trace_must_call_tool, tool: search, min_calls: 0}
        """), encoding="utf-8")
    config = load_config(path, allow_ineffective_assertions=True)
    (d,) = config.diagnostics
    assert (d.code, d.severity) == ("E_ASSERT_INEFFECTIVE", "warning")
    assert config.tests[0].assertions[0].type_name == "trace_must_call_tool"


def test_semantic_similarity_loads_with_an_embedder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "toy_embedder.py").write_text(
        "def embed(text):\n    return [float(len(text)), float(text.count(' ')), 1.0]\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = load_config(
        "version: 1\nsettings: {embedder: 'toy_embedder:embed'}\n" + _test("""
        expected: {type: semantic_similarity_to, semantic_similarity_to: "the refund was issued"}
        """).split("\n", 1)[1])
    assert config.tests[0].assertions[0].type_name == "semantic_similarity_to"
    sys.modules.pop("toy_embedder", None)


def test_empty_sequence_is_an_effective_expected_check() -> None:
    config = load_config(_test("""
        expected: {type: sequence_valid, sequence: []}
        """))
    assert [a.type_name for a in config.tests[0].assertions] == ["sequence_valid"]
    assert config.diagnostics == []


def test_relative_schema_file_resolves_against_the_rules_file_directory(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    rules_dir = tmp_path / "rules"
    rules_dir.mkdir()
    (rules_dir / "answer.schema.json").write_text('{"type": "object", "required": ["answer"]}', encoding="utf-8")
    (rules_dir / "rules.yaml").write_text(_test("""
        expected: {type: json_schema, schema_file: answer.schema.json}
        """), encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    config = load_config(Path("..") / "rules" / "rules.yaml")
    assert config.tests[0].assertions[0].type_name == "json_schema"
    # The same text given inline has no file: its relative paths are taken from the current directory.
    with pytest.raises(ConfigError) as exc:
        load_config((rules_dir / "rules.yaml").read_text(encoding="utf-8"))
    assert any("answer.schema.json" in d.message for d in exc.value.diagnostics)


@pytest.mark.parametrize("value, expected", [("07", 7), ("00", 0), ("0", 0), ("8", 8), ("1_000", 1000),
                                             ("'010'", "010"), ('"1:30"', "1:30"), ("1.5", 1.5),
                                             ("1.0e+3", 1000.0), ("'1e3'", "1e3"), ("1.0.0", "1.0.0"), ("e3", "e3"),
                                             ("0x1f", 31), ("v1", "v1"), ("true", True), ("False", False),
                                             ("'no'", "no"), ("y", "y"), ("n", "n")])
def test_numbers_both_yaml_versions_read_alike_load_as_written(value: str, expected: object) -> None:
    from spanassert.config.source import parse_document, read_source

    doc = parse_document(read_source("version: 1\nx-value: %s\n" % value))
    assert doc.value["x-value"] == expected and not doc.problems


@pytest.mark.parametrize("text", ["1e3", "-1E3", "1.0e3", ".5e1", "0o17", "09", "1e99999", "0o" + "7" * 5000])
def test_plain_text_yaml_1_2_reads_as_a_number_is_refused_briefly(text: str) -> None:
    from spanassert.config.source import parse_document, read_source

    doc = parse_document(read_source("version: 1\nx-value: %s\n" % text))
    (problem,) = doc.problems
    assert problem.code == "E_CFG_PARSE" and "YAML 1.2" in problem.message and "quote it" in (problem.hint or "")
    assert len(problem.format()) < 400


def test_an_integer_too_long_to_read_is_named_briefly_with_its_size(tmp_path: Path) -> None:
    # fuzz8: an integer of more than 4300 digits (Python's bound on reading one) was echoed whole into
    # the message (5,000 digits on one line) with the fix "quote it to make it a string".
    diags = _diagnostics(_test("""
        assertions:
          - type: trace_max_steps
            max: %s
        """ % ("9" * 5000)), tmp_path)
    d = diags[0]
    assert (d.code, d.line, d.column) == ("E_CFG_PARSE", 6, 14)
    assert d.message == "`99999999999999999999…99999999` is an integer of 5000 characters, too large to read"
    assert d.hint and "smaller number" in d.hint
    assert all(len(x.format()) < 300 for x in diags)


def test_control_characters_from_the_rules_file_are_escaped_in_printed_diagnostics(tmp_path: Path) -> None:
    # fuzz8: a test id (an untrusted pull request's rules file) holding an ANSI escape or a newline
    # reached the terminal raw through Diagnostic.format (validate, replay, the configurator).
    import subprocess

    path = tmp_path / "rules.yaml"
    path.write_text('version: 1\ntests:\n'
                    '  - id: "\\e[2J\\nspanassert: valid\\u2028\\x9b"\n    assertions: [{type: trace_max_steps, max: 1}]\n'
                    '  - id: "\\e[2J\\nspanassert: valid\\u2028\\x9b"\n    assertions: [{type: trace_max_steps, max: 1}]\n',
                    encoding="utf-8")
    diags = _diagnostics(path.read_text(encoding="utf-8"), tmp_path)
    assert diags[0].message.startswith("test id `\x1b[2J\nspanassert")  # the data keeps the exact text
    for args in (["validate", str(path)], ["replay", "--config", str(path), str(path)]):
        proc = subprocess.run([sys.executable, "-m", "spanassert", *args], capture_output=True, text=True,
                              timeout=60)
        said = proc.stdout + proc.stderr
        assert proc.returncode == 2, said
        assert "test id `\\x1b[2J\\nspanassert: valid\\u2028\\x9b` is already used" in said
        assert not [c for c in said if (ord(c) < 32 and c != "\n") or 0x7f <= ord(c) < 0xa0 or c == "\u2028"]
        assert "\nspanassert: valid" not in said


def test_every_error_a_field_check_gives_says_how_to_fix_it() -> None:
    # fuzz8: of 1,500 fuzzed rules files, 516 E_CFG_TYPE errors had no `fix:` line (what and where,
    # not how). Every error value_problem words now carries one.
    from spanassert.config.fields import value_problem

    schemas = [{"type": "string"}, {"type": "integer"}, {"type": ["number", "string"]}, {"type": "array"},
               {"type": "object"}, {"type": "boolean"}, {"const": 1}, {"type": "array", "minItems": 1},
               {"type": "string", "pattern": "^x$"}, {"type": "integer", "minimum": 0}, {"enum": ["a", "b"]},
               {"type": "object", "required": ["k"]}]
    values = [None, 1, -1, 1.5, "s", "", [], [1], {}, {"a": 1}, True]
    seen = 0
    for schema in schemas:
        for value in values:
            problem = value_problem(schema, value, "f")
            if problem is not None:
                seen += 1
                code, message, _, hint = problem
                assert hint, (schema, value, code, message)
    assert seen > 60


BAD_POLICIES = [
    '{version: "2.0", allow: lookup}',
    '{version: "2.0", deny: [1]}',
    '{version: 2.0, deny: [x]}',
    '{version: "2.0", tools: [x]}',
    '{version: "2.0", deny: [x], schemas: [x]}',
    '{version: "2.0", deny: [x], schemas: {$defs: 1}}',
    '{version: "2.0", deny: [x], enforcement: 1}',
    '{version: "2.0", deny: [x], enforcement: {unconstrained_tools: never}}',
    '{version: "2.0", allow: ["*"]}',
    '{refund: 1}',
    '{version: 2, refund: {type: object}}',
]


@pytest.mark.parametrize("policy", BAD_POLICIES)
def test_every_policy_error_says_how_to_fix_it(policy: str, tmp_path: Path) -> None:
    # session 9: an args_valid policy's errors said what and where but not how to fix them.
    diags = _diagnostics(_test("""
        expected:
          type: args_valid
          schema: %s
        """ % policy), tmp_path)
    errors = [d for d in diags if d.severity == "error"]
    assert errors and not [d for d in errors if d.code == "E_INTERNAL"]
    assert all(d.hint for d in errors), "\n".join(d.format() for d in errors if not d.hint)


TRICKY_TEXT = ["1e3", "09", "0o17", "1:30", "010", "no", "yes", "on", "1.0e3", "e3", "true", "0x1f", ".5e1", "-1E3",
               "1_000", "2001-12-14", "~", "null", ""]


def test_what_spanassert_writes_as_yaml_loads_back_as_the_same_text() -> None:
    # Drafted (`init --from-trace`), migrated and check()-built rules files: PyYAML's dumper leaves
    # `1e3`, `09`, `0o17` plain (text in YAML 1.1), which the loader refuses as YAML 1.2 numbers.
    from spanassert.config.source import parse_document, read_source
    from spanassert.config.yaml_values import safe_dump

    for flow in (None, False):
        text = safe_dump({"version": 1, "x-values": TRICKY_TEXT}, default_flow_style=flow)
        doc = parse_document(read_source(text))
        assert not doc.problems, [d.format() for d in doc.problems]
        assert doc.value["x-values"] == TRICKY_TEXT


def _policy_refusal(tmp_path: Path, name: str, content: str) -> List[Diagnostic]:
    (tmp_path / name).write_text(content, encoding="utf-8")
    return [d for d in _diagnostics(_test("""
        expected:
          type: args_valid
          policy: %s
        """ % name), tmp_path) if d.severity == "error"]


@pytest.mark.parametrize("name, content, needles", [
    ("bomb.yaml", ALIAS_BOMB, ("aliases expand to more than",)),
    ("twice.yaml", "refund: {type: object}\nrefund: {type: string}\n", ("duplicate key `refund`",)),
    ("exp.yaml", "refund: {properties: {amount: {maximum: 1e3}}}\n", ("`1e3` is text in YAML 1.1", "line 1")),
    ("twice.json", '{"refund": {"type": "object"}, "refund": {"type": "string"}}', ("given twice",)),
    ("nan.json", '{"refund": {"properties": {"amount": {"maximum": NaN}}}}', ("`NaN` is not JSON",)),
    ("big.yaml", "# " + "x" * (1 << 20) + "\n", ("1 MiB",)),
])
def test_a_policy_file_is_read_with_the_rules_files_bounds_and_checks(
        name: str, content: str, needles: Tuple[str, ...], tmp_path: Path) -> None:
    # session 9: policy files were read with a bare yaml.safe_load: an alias bomb expanded in full, a
    # repeated key kept its last value silently, and `maximum: 1e3` was the text "1e3".
    errors = _policy_refusal(tmp_path, name, content)
    policy = [d for d in errors if d.code == "E_CFG_POLICY"]
    assert policy, [d.format() for d in errors]
    text = policy[0].message + " " + (policy[0].hint or "")
    assert f"policy file {name!r}" in text and all(n in text for n in needles), policy[0].format()
    assert policy[0].hint


def test_a_json_policy_file_reads_json_numbers_as_json_does(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text('{"refund": {"type": "object", "properties": {"amount": {"maximum": 1e3}}}}',
                                     encoding="utf-8")
    (tmp_path / "rules.yaml").write_text(_test("""
        expected:
          type: args_valid
          policy: p.json
        """), encoding="utf-8")
    config = load_config(tmp_path / "rules.yaml")
    assert config.tests[0].assertions
