from __future__ import annotations

from typing import Any, Dict, List

import pytest
from assertion_driver import Call, build, drive, ok

from spanassert.config import load_config
from spanassert.core.model import CloseReason, ConfigError, EpisodeView, Verdict

CARD = "4111 1111 1111 1111"
KEY = "AKIAIOSFODNN7EXAMPLE"
SPEC: Dict[str, Any] = {"type": "trace_no_sensitive_data"}


def test_a_finding_in_arguments_fails_at_the_call_naming_detector_and_path_never_the_value() -> None:
    for evidence in ("none", "arguments", "all"):
        run = drive(dict(SPEC, evidence=evidence), [ok("search", {"q": "shoes"}),
                                                    Call("pay", {"order": 1, "card": {"number": CARD}}, args_at="end")])
        assert [(r.phase, r.position) for r in run.failures] == [("end", 1)]
        assert run.first.failure.message == (
            "credit_card found in the arguments of `pay` at $.card.number, call #2 (span 0000000000000002) "
            "(the value is never shown)")
        assert all("1111" not in m for m in run.messages)


def test_detectors_and_tools_narrow_the_scan() -> None:
    calls = [ok("login", {"key": KEY}), ok("pay", {"card": CARD})]
    assert drive(dict(SPEC, detectors=["pii"], tools=["login"]), calls).verdict is Verdict.PASSED
    run = drive(dict(SPEC, detectors=["secrets"]), calls)
    assert run.first.position == 0 and "cloud_access_key" in run.first.failure.message
    run = drive(dict(SPEC, detectors=["credit_card"]), calls)
    assert run.first.position == 1


def test_results_are_scanned_when_asked() -> None:
    calls = [ok("crm", {"id": 1}, result={"rows": [{"mail": "jane@example.com"}]})]
    assert drive(SPEC, calls).verdict is Verdict.PASSED
    run = drive(dict(SPEC, **{"in": "results"}), calls)
    assert "email found in the result of `crm` at $.rows[0].mail" in run.first.failure.message
    # A result cut short is still scanned; what is found fails, nothing found is not a pass.
    cut = [ok("crm", {}, result='{"rows": [{"mail": "jane@example.com", "n')]
    assert drive(dict(SPEC, **{"in": "results"}), cut).verdict is Verdict.FAILED
    cut = [ok("crm", {}, result='{"rows": [{"mail": "nobody", "n')]
    assert drive(dict(SPEC, **{"in": "results"}), cut).verdict is Verdict.INCONCLUSIVE


def test_output_is_scanned_at_close() -> None:
    a = build(dict(SPEC, **{"in": "output"}))
    assert a.tools == frozenset()
    state = a.new_state()
    view = EpisodeView()
    view.decidable = True
    view.root_span_id = "00000000000000aa"
    view.final_output, view.final_output_state = "Your key is " + KEY, "ok"
    out = a.on_close(state, view)
    assert out.verdict is Verdict.FAILED and out.span_id == "00000000000000aa"
    assert KEY not in out.message
    view.final_output = "All done."
    assert a.on_close(a.new_state(), view).verdict is Verdict.PASSED
    view.final_output, view.final_output_state = None, "missing"
    assert a.on_close(a.new_state(), view).verdict is Verdict.INCONCLUSIVE


@pytest.mark.parametrize("calls", [[Call("pay", status="ok")], [ok("pay", "{\"card\": \"41")]])
def test_unrecorded_or_unparsable_arguments_are_inconclusive(calls: List[Call]) -> None:
    assert drive(SPEC, calls).verdict is Verdict.INCONCLUSIVE


def test_too_long_to_scan_is_inconclusive() -> None:
    assert drive(SPEC, [ok("pay", {"blob": "x" * 100_001})]).verdict is Verdict.INCONCLUSIVE


def test_nothing_to_scan_is_not_applicable_and_cut_short_is_inconclusive() -> None:
    assert drive(SPEC, []).verdict is Verdict.NOT_APPLICABLE
    assert drive(SPEC, [ok("a", {"q": 1})], close=CloseReason.EVICTED).verdict is Verdict.INCONCLUSIVE


def test_tools_with_output_only_is_refused() -> None:
    text = ("version: 1\ntests:\n  - id: t\n    assertions:\n      - type: trace_no_sensitive_data\n"
            "        in: output\n        tools: [a]\n")
    with pytest.raises(ConfigError) as info:
        load_config(text)
    assert "E_CFG_VALUE" in [d.code for d in info.value.diagnostics]


def test_unknown_detector_is_refused() -> None:
    text = ("version: 1\ntests:\n  - id: t\n    assertions:\n      - type: trace_no_sensitive_data\n"
            "        detectors: [emial]\n")
    with pytest.raises(ConfigError):
        load_config(text)


# -- inside args_match --------------------------------------------------------------------------------


def test_args_match_detector_selects_calls_and_never_shows_the_value() -> None:
    spec = {"type": "trace_must_not_call_tool", "tool": "send_email", "args_match": {"to": {"detector": "email"}},
            "evidence": "arguments"}
    run = drive(spec, [ok("send_email", {"to": "ops-team"}), ok("send_email", {"to": "jane@example.com"})])
    assert [r.position for r in run.failures] == [1]
    assert run.first.failure.message == (
        "`send_email` called at call #2 (span 0000000000000002) with arguments matching to has email; "
        "such calls are forbidden")
    mixed = dict(spec, args_match={"to": {"detector": "pii"}, "subject": "^urgent"})
    assert drive(mixed, [ok("send_email", {"to": "+44 20 7946 0958", "subject": "later"})]).verdict is Verdict.PASSED
    assert drive(mixed, [ok("send_email", {"to": "+44 20 7946 0958", "subject": "urgent"})]).verdict is Verdict.FAILED


def test_args_match_detector_in_a_sequence_rule_loads_and_applies() -> None:
    text = """
version: 1
tests:
  - id: t
    expected:
      type: sequence_valid
      rules:
        - type: never_after
          trigger: read_secrets
          forbidden: {tool: http_post, args_match: {body: {detector: secrets}}}
"""
    config = load_config(text)
    assert config.tests[0].trace_assertions
    with pytest.raises(ConfigError):
        load_config(text.replace("detector: secrets", "detector: secretz"))


# -- a result cut to max_argument_bytes is not a whole result ----------------------------------------------


def test_a_result_cut_by_the_bound_is_never_cleared_but_what_it_shows_still_fails(tmp_path: Any) -> None:
    import json

    from otlp_file_exporter import FileSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from spanassert.replay import replay

    rules = load_config(
        "version: 1\nepisodes: {max_argument_bytes: 200}\ntests:\n"
        "  - id: pii\n    assertions: [{type: trace_no_sensitive_data, in: results, detectors: [email]}]\n"
        "  - id: flow\n    assertions: [{type: trace_no_flow, from: {tool: read}, to: {tool: send}}]\n")
    path = str(tmp_path / "cut.jsonl")
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(FileSpanExporter(path)))
    t = tp.get_tracer("cut")
    for head in ("x" * 300 + " jane@example.com", "jane@example.com " + "x" * 300):
        with t.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
            with t.start_as_current_span("execute_tool read", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read",
                    "gen_ai.tool.call.arguments": "{}", "gen_ai.tool.call.result": head}):
                pass
            with t.start_as_current_span("execute_tool send", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "send",
                    "gen_ai.tool.call.arguments": json.dumps({"body": "see jane@example.com"}), "gen_ai.tool.call.result": "ok"}):
                pass
    tp.shutdown()
    report = replay(rules, [path])
    cut_after, cut_before = [ep.test_verdicts() for ep in report.episodes]
    # The e-mail address lies past the cut: nothing found is not a pass; nor is "no flow".
    assert cut_after["pii"] is Verdict.INCONCLUSIVE
    assert cut_after["flow"] is Verdict.INCONCLUSIVE
    # Before the cut it is found.
    assert cut_before["pii"] is Verdict.FAILED


@pytest.mark.parametrize("arguments, where", [
    ({"jane@example.com": "cc"}, "$ (an object key)"),  # flat arguments keyed by an address
    ({"recipients": {"jane@example.com": {"role": "cc"}}}, "$.recipients (an object key)"),
    ({"batch": [{"note": "ok"}, {CARD: True}]}, "$.batch[1] (an object key)"),
    ({"jane@example.com": {"card": CARD}}, "$ (an object key)"),  # the key is found before what is below it
])
def test_object_keys_are_content_too_and_the_key_is_never_shown(arguments: Dict[str, Any], where: str) -> None:
    """A value a tool is called with can sit in an object key (a mapping keyed by e-mail address,
    by card number, by token): it was judged `passed` before keys were scanned."""
    run = drive(SPEC, [ok("notify", arguments)])
    assert run.verdict is Verdict.FAILED
    assert f"the arguments of `notify` at {where}," in run.first.failure.message
    assert all("jane" not in m and "1111" not in m for m in run.messages)
    results = drive(dict(SPEC, **{"in": "results"}), [ok("crm", {}, result=arguments)])
    assert results.verdict is Verdict.FAILED and f"at {where}," in results.first.failure.message


def test_keys_too_deep_or_too_many_to_scan_are_never_cleared() -> None:
    deep: Dict[str, Any] = {"k": "v"}
    for _ in range(100):
        deep = {"k": deep}
    assert drive(SPEC, [ok("notify", deep)]).verdict is Verdict.INCONCLUSIVE
    wide = {"items": [{f"k{i}": 1} for i in range(11_000)]}
    assert drive(SPEC, [ok("notify", wide)]).verdict is Verdict.INCONCLUSIVE
    clean = {"recipients": {"team": {"role": "cc"}}, "n": [1, {"a": "b"}]}
    assert drive(SPEC, [ok("notify", clean)]).verdict is Verdict.PASSED


# -- one search over the recorded text stands for the scan of every leaf --------------------------
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from spanassert.assertions.detectors import expand, scanner  # noqa: E402
from spanassert.assertions.sensitive import cleared_as_recorded, find_in_value  # noqa: E402

_leaf = st.text(alphabet="0123456789 -+@.AKIaSEcrtBbexyz", max_size=24) | st.integers(-10**20, 10**20) \
    | st.sampled_from(["4111 1111 1111 1111", "jane@example.com", "sk-" + "aB3" * 16, "AKIAIOSFODNN7EXAMPLE"])
_key = st.text("abc", max_size=3) | st.sampled_from(["jane@example.com", "4111111111111111", "eyJhbGciOi"])
_value = st.recursive(_leaf | st.none() | st.booleans() | st.floats(allow_nan=False),
                      lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_key, inner, max_size=4),
                      max_leaves=20)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_value, group=st.sampled_from(["all", "secrets", "pii"]))
def test_a_recorded_text_cleared_whole_is_what_the_scan_of_its_leaves_says(value: Any, group: str) -> None:
    import json

    with_scanner = scanner(expand([group]))
    raw = json.dumps(value, ensure_ascii=False)
    if cleared_as_recorded(raw, with_scanner):
        assert find_in_value(json.loads(raw), with_scanner) == (None, True)
    hit, _ = find_in_value(json.loads(raw), with_scanner)
    if hit is not None:
        assert not cleared_as_recorded(raw, with_scanner)
