"""16 threads, 200 interleaved episodes through one processor: no span lost or duplicated in the
exported OTLP JSON Lines file, and the live verdicts equal a replay of that file."""
from __future__ import annotations

import collections
import json
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest
from otlp_file_exporter import FileSpanExporter
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Status, StatusCode

from spanassert.otlp import read_spans
from spanassert.replay import replay

from .report import record
from .rig import LiveRig, child, new_root, rules, tool_attrs, verdict_signatures

THREADS = 16
EPISODES = 200


def _tool_for(episode: int, step: int) -> Dict[str, Any]:
    """A deterministic mix of passing and failing calls, different per episode."""
    kind = (episode * 7 + step) % 11
    if kind == 0 and episode % 5 == 0:
        return tool_attrs("delete_database")
    if kind in (1, 2):
        return tool_attrs("lookup_order", **{
            "gen_ai.tool.call.arguments": json.dumps({"order": episode}),
            "gen_ai.tool.call.result": json.dumps({"id": ("ord_%d" if episode % 3 else "x_%d") % step})})
    if kind == 3:
        return tool_attrs("refund", **{"gen_ai.tool.call.arguments": json.dumps({"amount": (episode * 37) % 900})})
    if kind == 4:
        q = "DROP TABLE users" if episode % 4 == 1 else "select 1"
        return tool_attrs("run_sql", **{"gen_ai.tool.call.arguments": json.dumps({"query": q})})
    return tool_attrs("search", **{"gen_ai.tool.call.arguments": json.dumps({"q": "x" * (step % 50)})})


@pytest.mark.timeout(1800)
def test_sixteen_threads_lose_no_span_and_agree_with_replay_of_the_exported_file(sizes: Any, tmp_path: Path) -> None:
    total_spans = sizes.pick(10_000, 100_000)
    per_episode = total_spans // EPISODES  # root + tools
    path = tmp_path / "traces.jsonl"
    exporter = FileSpanExporter(str(path))
    # A queue that holds every span: a drop here would be the SDK's batch processor, not ours.
    batch = BatchSpanProcessor(exporter, max_queue_size=total_spans + 1000, max_export_batch_size=512,
                               schedule_delay_millis=200)
    live: List[Any] = []
    config = rules()
    rig = LiveRig(config, export=batch, on_episode=live.append)
    escaped: List[BaseException] = []
    ended = [0]
    ended_lock = threading.Lock()
    barrier = threading.Barrier(THREADS)

    def worker(k: int) -> None:
        mine = [e for e in range(EPISODES) if e % THREADS == k]
        n = 0
        try:
            barrier.wait()
            roots = {e: new_root(rig.tracer, f"agent-{e % 4}") for e in mine}
            for step in range(per_episode - 1):  # interleave the thread's episodes call by call
                for e in mine:
                    span = child(rig.tracer, roots[e], "execute_tool", _tool_for(e, step))
                    if (e + step) % 13 == 0:
                        span.set_status(Status(StatusCode.ERROR, "tool failed"))
                    span.end()
                    n += 1
            for e in mine:
                roots[e].end()
                n += 1
        except BaseException as exc:  # noqa: BLE001 - counted and asserted below
            escaped.append(exc)
        with ended_lock:
            ended[0] += n

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    live_seconds = time.perf_counter() - t0
    assert rig.provider.force_flush(120_000)
    rig.provider.shutdown()

    ids = collections.Counter(r.span_id for r in read_spans([path]))
    lost = ended[0] - len(ids)
    duplicated = sum(n - 1 for n in ids.values() if n > 1)
    report = replay(config, [path])
    live_sig = verdict_signatures(live)
    replay_sig = verdict_signatures(report.episodes)
    differing = sum(1 for k in set(live_sig) | set(replay_sig) if live_sig.get(k) != replay_sig.get(k))
    failed = sum(1 for r in live for a in r.results if a.verdict.value == "failed")
    record("concurrency: 16 threads x 200 episodes", inputs=ended[0], exceptions_escaped=len(escaped),
           spans_lost=lost, seconds=time.perf_counter() - t0,
           note=f"{duplicated} duplicated; {len(live)} episodes, {differing} differ from replay; "
                f"{failed} failed verdicts; live {live_seconds:.1f}s")
    assert escaped == []
    assert ended[0] == per_episode * EPISODES
    assert lost == 0 and duplicated == 0
    assert len(live) == EPISODES and len(report.episodes) == EPISODES
    assert report.issues == []
    assert differing == 0
    assert failed > 0  # the mix really exercises violations
    assert rig.total("spanassert.internal_errors") == 0
