"""Telemetry.episode_closed counts in one pass over the results (issue 15, the live close): the
episode counter's verdict is ``EpisodeResult.verdict`` (shadow rules included, every mix), and the
per-rule counts are what a naive count of the results says. Real SDK meter provider and reader."""
from __future__ import annotations

import logging
import random
from collections import Counter
from typing import Any, Dict, Tuple

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from spanassert.core.emit import Telemetry
from spanassert.core.model import CloseReason, Verdict
from spanassert.core.results import EpisodeResult, assertion_result


def _points(reader: InMemoryMetricReader) -> Dict[str, Dict[Tuple[Any, ...], int]]:
    out: Dict[str, Dict[Tuple[Any, ...], int]] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                for p in m.data.data_points:
                    out.setdefault(m.name, {})[tuple(sorted(p.attributes.items()))] = p.value
    return out


def test_episode_and_rule_counts_are_what_the_results_say_for_every_mix_of_verdicts_and_shadow() -> None:
    rng = random.Random(15)
    reader = InMemoryMetricReader()
    tel = Telemetry(meter_provider=MeterProvider(metric_readers=[reader]))
    want_episodes: Counter[Tuple[str, str]] = Counter()
    want_rules: Counter[Tuple[str, str, str]] = Counter()
    verdicts = list(Verdict)
    reasons = list(CloseReason)
    for n in range(400):
        results = [assertion_result(f"t{rng.randrange(6)}", rng.choice(["a", "b"]), i, None, rng.choice(verdicts),
                                    "m", None, "error", rng.random() < 0.4)
                   for i in range(rng.randrange(0, 6))]
        if n % 7 == 0:  # only shadow rules (the verdict then leaves out `failed`)
            for r in results:
                r.shadow = True
        result = EpisodeResult(key=f"k{n}", trace_id=None, root_span_id=None, root_name=None, agent=None,
                               service=None, close_reason=rng.choice(reasons), results=results, call_count=0,
                               step_count=0, unreadable_calls=0)
        tel.episode_closed(result)
        want_episodes[(result.verdict.value, result.close_reason.value)] += 1
        for r in results:
            want_rules[(r.test_id, r.assertion_type, r.verdict.value)] += 1
    got = _points(reader)
    assert got["spanassert.episodes"] == {
        (("spanassert.close_reason", c), ("spanassert.verdict", v)): k for (v, c), k in want_episodes.items()}
    assert got["spanassert.assertion.results"] == {
        (("spanassert.assertion.type", a), ("spanassert.test.id", t), ("spanassert.verdict", v)): k
        for (t, a, v), k in want_rules.items()}
    assert len(want_episodes) > 8 and any(v == "failed" for v, _ in want_episodes)


def _violation(severity: str) -> Any:
    from spanassert.core.results import Violation

    return Violation(test_id="no-delete", assertion_type="trace_must_not_call_tool", assertion_index=0,
                     assertion_name=None, severity=severity, shadow=False, message="`delete` called\x1b[2J",
                     span_id="00000000000000aa", trace_id="0" * 31 + "1", episode_key="k")


def test_a_violation_is_logged_at_its_level_with_its_record_and_not_built_when_the_level_is_off(caplog: Any) -> None:
    """Without a logger provider a violation goes to the `spanassert` logger: at ERROR/WARNING,
    or at DEBUG when the user's on_violation reports it. The record (escaped text, the violation
    as `extra`) is built only when the logger takes that level; the callback runs either way."""
    seen = []
    tel = Telemetry(meter_provider=MeterProvider())
    tel.violation(_violation("error"))
    tel.violation(_violation("info"))
    tel.on_violation = seen.append
    with caplog.at_level(logging.INFO, logger="spanassert"):
        tel.violation(_violation("error"))  # DEBUG: off at INFO
    with caplog.at_level(logging.DEBUG, logger="spanassert"):
        tel.violation(_violation("critical"))
    got = [(r.levelno, r.getMessage(), r.spanassert_violation["severity"]) for r in caplog.records
           if r.name == "spanassert"]
    text = "(trace_must_not_call_tool): `delete` called\\x1b[2J"
    assert got == [(logging.ERROR, f"spanassert violation [error] no-delete {text}", "error"),
                   (logging.WARNING, f"spanassert violation [info] no-delete {text}", "info"),
                   (logging.DEBUG, f"spanassert violation [critical] no-delete {text}", "critical")]
    assert [v.severity for v in seen] == ["error", "critical"]
