"""Hostile input, each refused with a specific reason rather than guessed at: YAML alias bombs, deep
nesting, oversized files, non-UTF-8 bytes, huge attribute values, and regexes built to backtrack."""
from __future__ import annotations

import json
import time
import tracemalloc
from pathlib import Path
from typing import Any, List, Tuple

import pytest

from spanassert.assertions.base import EVIDENCE_MAX_CHARS
from spanassert.assertions.selectors import MAX_MATCH_CHARS
from spanassert.config import ConfigError, load_config
from spanassert.core.model import Verdict
from spanassert.otlp import read_spans

from .report import mib, record
from .rig import CountingProcessor, LiveRig, child, new_root, tool_attrs

HEADER = "version: 1\ntests:\n  - id: t\n    assertions:\n      - type: trace_must_call_tool\n        tool: x\n"


def _refusal(source: Any) -> Tuple[List[str], float, int]:
    """(diagnostic codes, seconds, peak bytes) of loading ``source``, which must be refused."""
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(ConfigError) as err:
            load_config(source)
        took = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return [d.code for d in err.value.diagnostics], took, peak


def test_yaml_alias_bombs_deep_nesting_oversize_and_bad_encoding_are_refused_fast(tmp_path: Path) -> None:
    laughs = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        laughs.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    cases = {
        "billion laughs": HEADER + "x-bomb:\n" + "\n".join("  " + line for line in laughs) + "\n",
        "quadratic aliases": HEADER + "x-a: &a " + "x" * 100_000 + "\nx-b: [" + ",".join(["*a"] * 5000) + "]\n",
        "deep flow nesting": HEADER + "x-deep: " + "[" * 100_000 + "]" * 100_000 + "\n",
        "deep block nesting": HEADER + "x-deep:\n" + "".join(" " * (2 * i + 2) + f"k{i}:\n" for i in range(500)),
        "over 1 MiB": HEADER + "x-pad: '" + "p" * (1 << 20) + "'\n",
    }
    bad_utf8 = tmp_path / "latin1.yaml"
    bad_utf8.write_bytes(HEADER.encode() + b"        id: caf\xe9\n")
    expected = {"billion laughs": "E_CFG_ALIAS", "quadratic aliases": "E_CFG_ALIAS",
                "deep flow nesting": "E_CFG_TOO_DEEP", "deep block nesting": "E_CFG_TOO_DEEP",
                "over 1 MiB": "E_CFG_TOO_LARGE", "non-UTF-8 file": "E_CFG_ENCODING"}
    figures = []
    worst_seconds, worst_peak = 0.0, 0
    for name in expected:
        codes, took, peak = _refusal(bad_utf8 if name == "non-UTF-8 file" else cases[name])
        figures.append(f"{name}: {codes[0] if codes else '?'} {took * 1000:.0f}ms")
        worst_seconds, worst_peak = max(worst_seconds, took), max(worst_peak, peak)
        assert expected[name] in codes, (name, codes)
    diag = pytest.raises(ConfigError, load_config, bad_utf8).value.diagnostics[0]
    assert (diag.line, diag.column) == (7, 16)  # the byte 0xe9 itself
    record("hostile: YAML bombs, nesting, size, encoding", inputs=len(expected), peak_memory=mib(worst_peak),
           memory_bound="1 MiB file", seconds=worst_seconds, note="; ".join(figures))
    assert worst_seconds < 5 and worst_peak < 64 << 20


def test_hostile_otlp_files_give_located_issues_and_keep_the_good_lines(tmp_path: Path) -> None:
    good = {"resourceSpans": [{"scopeSpans": [{"spans": [{
        "traceId": "0" * 31 + "1", "spanId": "0" * 15 + "1", "name": "invoke_agent a",
        "startTimeUnixNano": "1", "endTimeUnixNano": "2"}]}]}]}
    deep = '{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"' + "0" * 31 + '2","spanId":"' + "0" * 15 + \
           '2","name":"x","attributes":[{"key":"k","value":' + '{"arrayValue":{"values":[' * 50_000 + \
           "]}}" * 50_000 + "}]}]}]}]}"
    f = tmp_path / "hostile.jsonl"
    f.write_bytes(json.dumps(good).encode() + b"\n" + b'{"resourceSpans": "caf\xe9"}\n' + deep.encode() + b"\n"
                  + b"[" * 200_000 + b"\n" + json.dumps(good).replace('1"', '3"').encode() + b"\n")
    framed = tmp_path / "lies.binpb"
    framed.write_bytes(b"\x7f\xff\xff\xff\x0a\x00")  # a frame that claims 2 GiB
    issues: List[Any] = []
    records = list(read_spans([f, framed], on_issue=issues.append))
    where = sorted((i.file.rsplit("/", 1)[-1], i.line) for i in issues)
    record("hostile: OTLP files (bad UTF-8, deep JSON, lying frame)", inputs=6, spans_lost=2 - len(records),
           note="; ".join(i.format().rsplit("/", 1)[-1][:90] for i in issues))
    assert [r.span_id for r in records] == ["0" * 15 + "1", "0" * 15 + "3"]
    assert where == [("hostile.jsonl", 2), ("hostile.jsonl", 3), ("hostile.jsonl", 4), ("lies.binpb", None)]
    assert "UTF-8" in issues[0].reason and "0xe9" in issues[0].reason
    assert all("nested too deeply" in i.reason for i in issues[1:3])
    assert "exceeds the file" in issues[3].reason


EVIDENCE_RULES = """\
version: 1
episodes:
  max_argument_bytes: {max_bytes}
tests:
  - id: refund-limit
    assertions:
      - type: trace_args_valid
        tool: refund
        evidence: arguments
        schema:
          type: object
          properties:
            amount: {{type: number, maximum: 500}}
  - id: no-drop
    assertions:
      - type: trace_must_not_call_tool
        tool: run_sql
        args_match: {{query: "(a+)+$"}}
"""


def _one_call(rig: LiveRig, tool: str, arguments: Any) -> None:
    root = new_root(rig.tracer)
    span = child(rig.tracer, root, f"execute_tool {tool}", tool_attrs(tool))
    span.set_attribute("gen_ai.tool.call.arguments", arguments)
    span.end()
    root.end()


@pytest.mark.needs_dict_attributes
def test_huge_and_non_utf8_arguments_are_truncated_in_evidence_or_refused_as_unreadable() -> None:
    secret_tail = "TAIL-SECRET-" + "z" * 10
    results: List[Any] = []
    seen: List[Any] = []
    config = load_config(EVIDENCE_RULES.format(max_bytes=65_536))
    rig = LiveRig(config, export=CountingProcessor(), on_episode=results.append, on_violation=seen.append)
    note = "x" * 60_000 + secret_tail  # under max_argument_bytes: read, and shown truncated
    _one_call(rig, "refund", json.dumps({"amount": 9999, "note": note}))
    _one_call(rig, "refund", json.dumps({"amount": 1, "note": "y" * 2_000_000}))  # over the bound: unreadable
    _one_call(rig, "refund", b"\xff\xfe{\"amount\": 9999}")  # bytes that are not UTF-8
    [violation] = seen
    shown = violation.message.split("; arguments: ", 1)[1]
    verdicts = [r.test_verdicts()["refund-limit"] for r in results]
    record("hostile: huge / non-UTF-8 argument values", inputs=3, secrets_leaked=int(secret_tail in violation.message),
           note=f"evidence shown {len(shown)} chars of a {len(note)}-char value; verdicts {[v.value for v in verdicts]}")
    assert len(shown) <= EVIDENCE_MAX_CHARS and shown.endswith("…")
    assert secret_tail not in violation.message
    assert verdicts == [Verdict.FAILED, Verdict.INCONCLUSIVE, Verdict.INCONCLUSIVE]
    assert rig.total("spanassert.spans.unreadable") == 2
    assert rig.total("spanassert.internal_errors") == 0


RISKY_RULES = """\
version: 1
tests:
  - id: nested
    assertions:
      - type: trace_must_not_call_tool
        tool: run_sql
        args_match: {q: "(a+)+$"}
  - id: overlapping
    assertions:
      - type: trace_must_not_call_tool
        tool: run_sql
        args_match: {q: "^(a|a)*$"}
  - id: star-star
    assertions:
      - type: trace_must_call_tool
        tool: run_sql
        args_match: {q: "(.*)*x"}
  - id: result-regex
    assertions:
      - type: trace_tool_result
        tool: lookup_order
        assert: ["json.id matches /^(\\\\w+\\\\s?)*$/"]
  - id: safe
    assertions:
      - type: trace_must_not_call_tool
        tool: run_sql
        args_match: {q: "(?i)drop\\\\s+table", r: "^ord_[0-9]+$", s: "(foo|bar)*"}
"""


def test_backtracking_regexes_warn_at_load_and_a_1mb_argument_is_matched_in_bounded_time() -> None:
    config = load_config(RISKY_RULES)
    warned = sorted(d.path.split(".")[0] for d in config.diagnostics if d.code == "W_CFG_REGEX_BACKTRACKING")
    assert warned == ["tests[0]", "tests[1]", "tests[2]", "tests[3]"]
    assert all(d.severity == "warning" and d.line for d in config.diagnostics)

    crafted = "a" * 1_000_000 + "!"  # the classic input for (a+)+$, at 1 MB
    at_bound = "a" * MAX_MATCH_CHARS  # as long as is ever matched
    times = {}
    for label, max_bytes, text in (("1 MB, default bound", 65_536, crafted), ("1 MB, raised bound", 4_000_000, crafted),
                                   ("100k chars", 4_000_000, at_bound)):
        results: List[Any] = []
        rig = LiveRig(load_config(EVIDENCE_RULES.format(max_bytes=max_bytes)), export=CountingProcessor(),
                      on_episode=results.append)
        t0 = time.perf_counter()
        _one_call(rig, "run_sql", json.dumps({"query": text}))
        times[label] = (time.perf_counter() - t0, results[0].test_verdicts()["no-drop"])
    note = ", ".join(f"{k}: {t * 1000:.1f} ms ({v.value})" for k, (t, v) in times.items())
    record("hostile: 1 MB argument vs (a+)+$", inputs=len(times), seconds=max(t for t, _ in times.values()),
           note=f"{note}; text over {MAX_MATCH_CHARS} chars is not matched; 4 risky regexes warned at load")
    # Over max_argument_bytes the arguments are not read; over MAX_MATCH_CHARS an argument is not
    # matched: either way undecidable, never a guess from a cut text.
    assert times["1 MB, default bound"][1] is Verdict.INCONCLUSIVE
    assert times["1 MB, raised bound"][1] is Verdict.INCONCLUSIVE
    assert times["100k chars"][1] is Verdict.FAILED  # matched whole: (a+)+$ holds
    assert all(t < 1.0 for t, _ in times.values()), times
