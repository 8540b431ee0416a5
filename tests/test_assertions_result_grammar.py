from __future__ import annotations

import json
from typing import Any

import pytest

from spanassert.assertions.base import BuildContext
from spanassert.assertions.result_grammar import (
    FAILED,
    HELD,
    UNDECIDED,
    BodyContains,
    JsonCompare,
    JsonIs,
    JsonLength,
    JsonMatches,
    ResultGrammarError,
    ResultView,
    StatusCheck,
    compile_result_checks,
    parse_result_line,
)
from spanassert.core.model import STATUS_ERROR, STATUS_UNSET, ToolCall


def shown(value: Any) -> str:
    return f"<{value!r}>"


def call_with(result: Any, status: str = STATUS_UNSET) -> ToolCall:
    call = ToolCall("fetch", span_id="00000000000000aa")
    call.finish(end_ns=1, status=status, result_raw=result)
    return call


def judge(line: str, result: Any, status: str = STATUS_UNSET) -> str:
    call = call_with(result, status)
    verdict, _ = parse_result_line(line).check(call, ResultView.of(call), shown)
    return verdict


@pytest.mark.parametrize(
    "line, kind",
    [
        ("status == 200", StatusCheck),
        ("status != error", StatusCheck),
        ('body contains "done"', BodyContains),
        ('body not contains "error"', BodyContains),
        ("json.hits is array", JsonIs),
        ("json.a.0.b is set", JsonIs),
        ("json.version matches /^\\d+\\./", JsonMatches),
        ("json.items length >= 1", JsonLength),
        ('json.version == "0.12.1"', JsonCompare),
        ("json.total <= 3", JsonCompare),
        ("json.flag != true", JsonCompare),
    ],
)
def test_every_grammar_form_parses(line: str, kind: type) -> None:
    assert isinstance(parse_result_line(line), kind)


@pytest.mark.parametrize(
    "line, reason",
    [
        ("version = json.version", "binds"),
        ("uid = body match /id=(\\d+)/", "binds"),
        ("json.version == 0.12.1", "not a JSON scalar"),
        ("json.version == unquoted", "not a JSON scalar"),
        ('json.x == {"a": 1}', "not a scalar"),
        ("json.x is object", "not in the result grammar"),
        ("status > 200", "not in the result grammar"),
        ("body contains done", "not in the result grammar"),
        ('body contains "a"\n"b"', "single line"),
        ("json..x is set", "not in the result grammar"),
        ("response.status == 200", "not in the result grammar"),
    ],
)
def test_lines_outside_the_grammar_are_refused_with_a_reason(line: str, reason: str) -> None:
    with pytest.raises(ResultGrammarError) as exc:
        parse_result_line(line)
    assert reason in exc.value.reason


def test_compile_reports_each_bad_line_at_its_index_with_the_forms() -> None:
    ctx = BuildContext()
    checks = compile_result_checks(["status == 200", "json.x is object", "json.y matches /(/"], ctx, "assert")
    assert len(checks) == 1
    assert [(e[0], e[2]) for e in ctx.errors] == [("E_CFG_RESULT_GRAMMAR", "assert[1]"), ("E_CFG_REGEX", "assert[2]")]
    assert "`json.x is object`" in ctx.errors[0][1]
    assert "json.<path> length" in (ctx.errors[0][3] or "")


@pytest.mark.parametrize(
    "line, result, status, verdict",
    [
        ("status == ok", None, STATUS_UNSET, HELD),
        ("status == ok", None, STATUS_ERROR, FAILED),
        ("status != error", None, STATUS_ERROR, FAILED),
        ("status == 200", {"status_code": 200}, STATUS_UNSET, HELD),
        ("status == 200", {"status": 500}, STATUS_UNSET, FAILED),
        ("status != 500", {"status": 200}, STATUS_UNSET, HELD),
        ("status == 200", {"data": 1}, STATUS_UNSET, UNDECIDED),
        ("status == 200", None, STATUS_UNSET, UNDECIDED),
        ('body contains "done"', "all done", STATUS_UNSET, HELD),
        ('body contains "done"', "nope", STATUS_UNSET, FAILED),
        ('body not contains "err"', "error!", STATUS_UNSET, FAILED),
        ('body contains "done"', None, STATUS_UNSET, UNDECIDED),
        ('body contains "\\"k\\": 1"', {"k": 1}, STATUS_UNSET, HELD),
        ("json.hits is array", {"hits": []}, STATUS_UNSET, HELD),
        ("json.hits is array", {"hits": {}}, STATUS_UNSET, FAILED),
        ("json.n is number", {"n": 1.5}, STATUS_UNSET, HELD),
        ("json.n is number", {"n": True}, STATUS_UNSET, FAILED),
        ("json.b is boolean", {"b": False}, STATUS_UNSET, HELD),
        ("json.v is null", {"v": None}, STATUS_UNSET, HELD),
        ("json.v is null", {}, STATUS_UNSET, FAILED),
        ("json.v is set", {"v": 0}, STATUS_UNSET, HELD),
        ("json.v is set", {"v": None}, STATUS_UNSET, FAILED),
        ("json.v is set", {}, STATUS_UNSET, FAILED),
        ("json.items.1.id is string", {"items": [{"id": 1}, {"id": "b"}]}, STATUS_UNSET, HELD),
        ("json.items.5.id is set", {"items": [{"id": 1}]}, STATUS_UNSET, FAILED),
        ("json.0 is number", [7], STATUS_UNSET, HELD),
        ("json.version matches /^\\d+\\./", {"version": "0.13.0"}, STATUS_UNSET, HELD),
        ("json.version matches /^\\d+\\./", {"version": "v1"}, STATUS_UNSET, FAILED),
        ("json.version matches /1/", {"version": 1}, STATUS_UNSET, FAILED),
        ("json.items length >= 1", {"items": [1]}, STATUS_UNSET, HELD),
        ("json.items length > 1", {"items": [1]}, STATUS_UNSET, FAILED),
        ("json.name length < 4", {"name": "abc"}, STATUS_UNSET, HELD),
        ("json.n length < 4", {"n": 3}, STATUS_UNSET, FAILED),
        ('json.version == "0.12.1"', {"version": "0.13.0"}, STATUS_UNSET, FAILED),
        ('json.version == "0.13.0"', {"version": "0.13.0"}, STATUS_UNSET, HELD),
        ("json.n == 1", {"n": 1.0}, STATUS_UNSET, HELD),
        ("json.n == 1", {"n": True}, STATUS_UNSET, FAILED),
        ('json.n == "1"', {"n": 1}, STATUS_UNSET, FAILED),
        ("json.n == null", {"n": None}, STATUS_UNSET, HELD),
        ("json.n == null", {}, STATUS_UNSET, FAILED),
        ("json.n != 5", {}, STATUS_UNSET, HELD),
        ("json.n > 2", {"n": 3}, STATUS_UNSET, HELD),
        ("json.n <= 2", {"n": 3}, STATUS_UNSET, FAILED),
        ('json.n > 2', {"n": "3"}, STATUS_UNSET, FAILED),
        ("json.n > 2", {}, STATUS_UNSET, FAILED),
        ("json.x is set", "plain text, not JSON", STATUS_UNSET, FAILED),
        ("json.x is set", None, STATUS_UNSET, UNDECIDED),
        ("json.x is set", '{"x": 1, "trunc', STATUS_UNSET, UNDECIDED),
        ("json.x == 1", '{"x": 1}', STATUS_UNSET, HELD),
    ],
)
def test_grammar_semantics(line: str, result: Any, status: str, verdict: str) -> None:
    raw = None if result is None else (result if isinstance(result, str) else json.dumps(result))
    assert judge(line, raw, status) == verdict


def test_observed_values_pass_through_the_show_function() -> None:
    call = call_with('{"version": "0.13.0"}')
    _, observed = parse_result_line('json.version == "0.12.1"').check(call, ResultView.of(call), shown)
    assert observed == "got <'0.13.0'>"
    _, observed = parse_result_line("json.version is number").check(call, ResultView.of(call), shown)
    assert observed == "got string"
