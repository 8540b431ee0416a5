"""SARIF results are cut deterministically at 25,000 (most severe first, then input order), with the
number left out in ``run.properties``."""
from __future__ import annotations

import json

from spanassert.config import load_config
from spanassert.core.model import SpanRecord
from spanassert.replay import replay_records
from spanassert.report import DEFAULT_MAX_RESULTS, render_sarif

RULES = """\
version: 1
tests:
  - id: no-db-delete
    severity: critical
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
  - id: no-shell
    severity: info
    assertions:
      - type: trace_must_not_call_tool
        tool: run_shell
"""


def episode_records(n: int, calls_per_episode: int, tool: str, offset: int = 0):
    """Decoded spans as the OTLP readers yield them: an invoke_agent root and tool children."""
    for e in range(offset, offset + n):
        trace_id = f"{e + 1:032x}"
        root = f"{e + 1:08x}00000000"
        t0 = 1_700_000_000_000_000_000 + e * 1_000_000
        for c in range(calls_per_episode):
            yield SpanRecord(trace_id=trace_id, span_id=f"{e + 1:08x}{c + 1:08x}", parent_span_id=root,
                             name=f"execute_tool {tool}", start_ns=t0 + 10 * c + 1, end_ns=t0 + 10 * c + 5,
                             attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool})
        yield SpanRecord(trace_id=trace_id, span_id=root, name="invoke_agent ops", start_ns=t0,
                         end_ns=t0 + 10 * calls_per_episode + 10,
                         attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "ops"})


def test_sarif_keeps_the_first_25000_results_most_severe_first_and_counts_the_rest() -> None:
    config = load_config(RULES)
    # 500 info-level violations read first, then 25,000 critical ones: the cut must keep the
    # critical ones, whatever their position in the input.
    records = list(episode_records(50, 10, "run_shell")) + list(episode_records(2500, 10, "delete_database", 50))
    report = replay_records(config, records)
    assert len(report.violations) == 25_500
    log = render_sarif(report)
    run = log["runs"][0]
    assert DEFAULT_MAX_RESULTS == 25_000
    assert len(run["results"]) == 25_000
    assert run["properties"]["omittedResults"] == 500 and run["properties"]["totalResults"] == 25_500
    assert run["properties"]["truncated"] is True
    assert {r["ruleId"] for r in run["results"]} == {"no-db-delete"}
    # Same input, same file.
    again = render_sarif(replay_records(config, records))
    assert json.dumps(again, sort_keys=True) == json.dumps(log, sort_keys=True)


def test_sarif_cut_keeps_input_order_within_a_level() -> None:
    config = load_config(RULES)
    report = replay_records(config, list(episode_records(4, 2, "delete_database")))
    full = render_sarif(report)["runs"][0]["results"]
    cut = render_sarif(report, max_results=3)["runs"][0]
    assert cut["results"] == full[:3]
    assert cut["properties"]["omittedResults"] == len(full) - 3 == 5
    names = [r["locations"][0]["logicalLocations"][0]["fullyQualifiedName"] for r in cut["results"]]
    assert names == [f"trace/{1:032x}/span/{1:08x}{1:08x}", f"trace/{1:032x}/span/{1:08x}{2:08x}",
                     f"trace/{2:032x}/span/{2:08x}{1:08x}"]
