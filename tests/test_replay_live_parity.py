"""The verdicts `spanassert replay` gives on an exported file are the ones the live
AssertionSpanProcessor gave while the spans were produced — in process via `replay()`, and through
the CLI's JSON report."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List

from otlp_file_exporter import FileSpanExporter
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from replay_episodes import write_episodes
from test_replay_cli import spanassert

from spanassert import AssertionSpanProcessor
from spanassert.config import load_config
from spanassert.replay import replay
from spanassert.core.results import EpisodeResult

RULES = """\
version: 1
tests:
  - id: no-db-delete
    severity: critical
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
  - id: no-prod-delete
    mode: shadow
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_database
        args_match: {name: "^prod$"}
  - id: search-first
    assertions:
      - type: trace_must_call_tool
        tool: search
      - type: trace_tool_sequence
        sequence: [search, refund]
        allow_other_tools: true
  - id: budget
    assertions:
      - type: trace_max_tool_calls
        max: 3
  - id: refund-args
    assertions:
      - type: trace_args_valid
        tool: refund
        schema:
          type: object
          properties: {amount: {type: number, maximum: 100}}
          required: [amount]
"""

EPISODES = [
    [("search", {"q": "order 7"}), ("refund", {"amount": 20})],
    [("refund", {"amount": 500}), ("search", {"q": "late"})],
    [("search", {}), ("delete_database", {"name": "prod"})],
    [("delete_database", None), ("search", {}), ("search", {}), ("refund", {"amount": 1})],
    [],
]


def _signatures(episodes: List[EpisodeResult]) -> Dict[str, list]:
    return {ep.key: ep.verdict_signature() for ep in episodes}


def test_replayed_file_gives_the_live_processors_verdicts(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    config = load_config(str(rules))
    traces = tmp_path / "live.jsonl"
    live: List[EpisodeResult] = []
    processor = AssertionSpanProcessor(config, export=SimpleSpanProcessor(FileSpanExporter(str(traces))),
                                       on_episode=live.append, tick_interval=0)
    written = write_episodes(traces, EPISODES, processor=processor)
    assert [ep.key for ep in live] == written.trace_ids
    # The rules must give every kind of verdict here, or agreement would prove little.
    seen = {r.verdict.value for ep in live for r in ep.results}
    assert {"passed", "failed", "inconclusive"} <= seen

    replayed = replay(config, [traces])
    assert replayed.issues == []
    assert _signatures(replayed.episodes) == _signatures(live)
    assert [[r.message for r in ep.results] for ep in replayed.episodes] == \
        [[r.message for r in ep.results] for ep in live]

    proc = spanassert("--config", str(rules), "--format", "json", str(traces))
    doc = json.loads(proc.stdout)
    cli = {e["key"]: sorted((r["test"], r["index"], r["verdict"], r["span_id"] or "") for r in e["results"])
           for e in doc["episodes"]}
    assert cli == _signatures(live)
    live_failed = any(r.verdict.value == "failed" and not r.shadow for ep in live for r in ep.results)
    assert proc.returncode == (1 if live_failed else 0) == 1
