"""``spanassert replay --jobs N``: the same report as one process, from N processes.

The calling process judges shard 0 and N - 1 processes it forks the others (each sends its
results back, pickled, through a pipe of its own). Every
process reads the whole input; each keeps only the traces of its shard (by trace id; JSON Lines
decode only those spans, see :mod:`spanassert.otlp.shard`), and for every other span moves its
buffer's clock on, as if it had held it. So each process releases
each of its traces at the same point of the input as one process would, with the same spans, to
an engine of its own: with trace-keyed episodes an episode is one trace, and its verdicts do not
depend on the other traces. Each episode result and violation carries the key of the release that
produced it (:func:`spanassert.core.assembly.release_order`); sorting the shards' results by it
gives one process's order, and the merged report is the one a single process writes.

Episodes keyed by a conversation span several traces, which may fall in different shards: such
rules files are refused (:func:`refusal`). The bounds on what one process holds (``max_open``
episodes, the late window, the traces being assembled) apply per process, so an input that
overflows them in one process may not in N.
"""
from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import traceback
from dataclasses import fields
from itertools import starmap
from operator import attrgetter
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from ..config.model import Config
from ..core.model import SpanRecord
from ..core.report import InputPrompts, Report
from ..core.results import AssertionResult, EpisodeResult, Violation, assertion_result
from ..otlp.shard import Shard, shard_of

PathArg = Union[str, "os.PathLike[str]"]


def refusal(configs: Sequence[Config], paths: Sequence[Any], jobs: int) -> Optional[str]:
    """Why ``--jobs`` cannot be used for this run, or None."""
    if jobs <= 1:
        return None
    for c in configs:
        key = c.episodes.key
        if key != "trace":
            return (f"--jobs {jobs} needs trace-keyed episodes, but {c.source or 'the rules file'} keys episodes by "
                    f"`{key}` (`episodes.key`): one conversation's traces could be judged in different processes. "
                    "Run without --jobs")
    if any(os.fspath(p) == "-" for p in paths):
        return f"--jobs {jobs} reads the input once per process, and stdin (-) can be read only once: name files"
    if not hasattr(os, "fork"):
        return f"--jobs {jobs} needs processes started by fork, which {sys.platform} does not offer: run without --jobs"
    return None


class WorkerFailed(RuntimeError):
    """A worker process raised (its traceback is in the message) or ended without its results."""


class _Diverged(Exception):
    """This shard's reader found a line read otherwise than the other processes took it to be."""


def _watched(batches: Iterable[List[Optional[SpanRecord]]], shard: Shard) -> Iterator[List[Optional[SpanRecord]]]:
    for batch in batches:
        if shard.diverged:
            raise _Diverged
        yield batch
    if shard.diverged:
        raise _Diverged


# Set in the parent just before the worker processes are forked; read by them.
_JOB: Optional[Dict[str, Any]] = None


def _run_shard(shard: int, pack: bool) -> Tuple[str, Any]:
    from ..otlp import OTLPInputError
    from ..otlp.reader import read_span_batches
    from .driver import replay_ordered

    job = _JOB
    assert job is not None
    reports = [Report(c) for c in job["configs"]]
    for rep in reports:
        rep.window = job["window"]
    if job["timelines"] and reports:
        reports[0].calls = {}
    issues: List[Any] = []

    def issue(i: Any) -> None:
        if shard == 0:  # every process reads the same input: one of them reports it
            issues.append(i)

    share = Shard(shard, job["jobs"])
    paths = list(job["paths"])
    batches: Iterable[List[Optional[SpanRecord]]]
    if job["exact"]:  # every line decoded whole, then this shard's spans kept
        batches = map(share.only, read_span_batches(paths, on_issue=issue, strict=job["strict"]))
    else:
        batches = _watched(read_span_batches(paths, on_issue=issue, strict=job["strict"], shard=share), share)
    try:
        keys = replay_ordered(reports, batches, settle_spans=job["settle_spans"])
    except OTLPInputError as exc:
        return "strict", exc.issue
    except _Diverged:
        return "diverged", None
    return "ok", ([_payload(rep, pack) for rep in reports], keys, issues)


# A shard's episode results and violations go to the parent as tuples of their fields, read by
# attrgetter in C: pickling thousands of records one by one (a state dict each, rebuilt attribute by
# attribute) cost the worker about four times as much, and the parent a quarter more, on its
# critical path. The parent makes the same records again (tests/test_replay_jobs.py compares them).
_RESULT_NAMES = [f.name for f in fields(AssertionResult)]  # assertion_result's parameters, in order
_EPISODE_NAMES = [f.name for f in fields(EpisodeResult) if f.name != "results"]
_VIOLATION_NAMES = [f.name for f in fields(Violation)]
_result_fields = attrgetter(*_RESULT_NAMES)
_episode_fields = attrgetter(*_EPISODE_NAMES)
_violation_fields = attrgetter(*_VIOLATION_NAMES)


def _pack_episodes(episodes: List[EpisodeResult]) -> List[Tuple[Any, List[Any]]]:
    # Results with equal fields (a rule passed with its usual message: most of them) become one
    # tuple, which pickle then writes once and refers back to: at the bench's 2,000 episodes per
    # shard, 2.5 MB -> 0.4 MB, pickling 32 -> 6 ms in the worker, unpickling 17 -> 5 ms in the
    # parent, both on the critical path. The fields are str, int, bool, None and enum members, so
    # the shared tuple is immutable; the parent still makes one record per result.
    same: Dict[Tuple[Any, ...], Tuple[Any, ...]] = {}
    one = same.setdefault
    return [(_episode_fields(ep), [one(t, t) for t in map(_result_fields, ep.results)]) for ep in episodes]


def _unpack_episodes(rows: List[Tuple[Any, List[Any]]]) -> List[EpisodeResult]:
    return [EpisodeResult(results=list(starmap(assertion_result, results)), **dict(zip(_EPISODE_NAMES, values)))
            for values, results in rows]


def _pack_violations(violations: List[Violation]) -> List[Any]:
    return [_violation_fields(v) for v in violations]


def _unpack_violations(rows: List[Any]) -> List[Violation]:
    return [Violation(**dict(zip(_VIOLATION_NAMES, values))) for values in rows]


def _payload(rep: Report, pack: bool) -> Dict[str, Any]:
    """What the parent needs of a shard's report (the config stays behind: the parent has it)."""
    return {
        "episodes": _pack_episodes(rep.episodes) if pack else rep.episodes,
        "violations": _pack_violations(rep.violations) if pack else rep.violations,
        "spans_read": rep.spans_read,
        "unreadable_spans": rep.unreadable_spans, "late_spans": rep.late_spans, "amended": rep.amended,
        "overflows": rep.overflows, "sources": rep.sources,
        "internal_errors": (rep.internal_errors, rep.internal_error_first),
        "coverage": {k: c.counts for k, c in rep.coverage.items()}, "tool_names": rep.tool_names,
        "trace_times": rep.trace_times, "outside_window": rep.outside_window, "calls": rep.calls,
        "key_traces": rep.key_traces,
        "inputs": None if rep.inputs is None else (rep.inputs.found, rep.inputs.traces_with_prompt),
    }


def _merge(rep: Report, parts: List[Dict[str, Any]], keys: List[Tuple[List[Any], List[Any]]]) -> None:
    episodes = [(k, e) for part, (ek, _) in zip(parts, keys) for k, e in zip(ek, part["episodes"])]
    episodes.sort(key=lambda x: x[0])
    rep.episodes = [e for _, e in episodes]
    violations = [(k, v) for part, (_, vk) in zip(parts, keys) for k, v in zip(vk, part["violations"])]
    violations.sort(key=lambda x: x[0])
    rep.violations = [v for _, v in violations]
    rep.spans_read = parts[0]["spans_read"]  # every process counts every span it read
    for part in parts:
        rep.unreadable_spans += part["unreadable_spans"]
        rep.late_spans += part["late_spans"]
        rep.amended += part["amended"]
        errors, first = part["internal_errors"]
        rep.internal_errors += errors
        if rep.internal_error_first is None:
            rep.internal_error_first = first
        rep.outside_window += part["outside_window"]
        for kind, n in part["overflows"].items():
            rep.overflows[kind] = rep.overflows.get(kind, 0) + n
        if part["sources"] is not None and rep.sources is not None:
            rep.sources.update(part["sources"])
        for key, counts in part["coverage"].items():
            cov = rep.coverage.get(key)
            if cov is not None:
                for verdict, n in counts.items():
                    cov.counts[verdict] += n
        for name, n in part["tool_names"].items():
            rep.tool_names[name] = rep.tool_names.get(name, 0) + n
        rep.trace_times.update(part["trace_times"])
        if part["calls"] is not None:
            if rep.calls is None:
                rep.calls = {}
            rep.calls.update(part["calls"])
        for key, traces in part["key_traces"].items():
            rep.key_traces.setdefault(key, []).extend(traces)
        if part["inputs"] is not None:
            if rep.inputs is None:
                rep.inputs = InputPrompts.of(rep.config) or InputPrompts(set())
            found, with_prompt = part["inputs"]
            rep.inputs.found |= found
            rep.inputs.traces_with_prompt += with_prompt


def _import_before_fork() -> None:
    """What every shard imports as it reads (the typed JSON decoder), imported once, before the
    processes are forked, rather than once in each."""
    with contextlib.suppress(ImportError):  # msgspec missing: every process reads the careful way
        import spanassert.otlp.json_typed  # noqa: F401 -- imported for its effect: the forked processes inherit it


def _fork_shard(shard: int) -> Tuple[int, int]:
    """A process forked to judge ``shard``: it writes its packed result, pickled, to a pipe and
    ends. (pid, the pipe's read end.)"""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker: never returns into the caller's code
        code = 1
        try:
            os.close(r)
            try:
                out: Tuple[str, Any] = _run_shard(shard, pack=True)
            except BaseException as exc:  # noqa: BLE001 -- the parent raises it (see _collect)
                out = ("error", "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
            with open(w, "wb") as f:
                f.write(pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL))
            code = 0
        finally:
            os._exit(code)  # no interpreter shutdown: nothing of the parent's is flushed or freed twice
    os.close(w)
    return pid, r


def _collect(pid: int, r: int) -> Tuple[str, Any]:
    """A worker's (status, value), once it has written all of it; then the worker is reaped."""
    try:
        with open(r, "rb") as f:  # closes r
            data = f.read()
    except BaseException:
        _end(pid, None)
        raise
    _, status = os.waitpid(pid, 0)
    if not data or status != 0:
        raise WorkerFailed(f"a --jobs worker process ended without its results (wait status {status})")
    got: Tuple[str, Any] = pickle.loads(data)
    if got[0] == "error":
        raise WorkerFailed(f"a --jobs worker process failed:\n{got[1]}")
    return got


def _end(pid: int, r: Optional[int]) -> None:
    """A worker the parent no longer waits for: killed and reaped."""
    if r is not None:
        with contextlib.suppress(OSError):
            os.close(r)
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def _run_shards(jobs: int) -> List[Tuple[str, Any]]:
    """Each shard's (status, value), in shard order."""
    global _JOB
    results = []
    _import_before_fork()
    workers: List[Tuple[int, int]] = []
    try:
        # Forked directly (os.fork and a pipe each), not through multiprocessing's Pool: its import,
        # handler threads, queues and shutdown were start-up and teardown on the critical path.
        workers.extend(_fork_shard(shard) for shard in range(1, jobs))
        # Shard 0 is judged in this process while the others work: its results need no pickling,
        # and the parent's CPU, idle until now, does a share.
        results.append(_run_shard(0, pack=False))
        # In shard order, each as soon as it is there; all of them, even after a shard diverged.
        while workers:
            status, value = _collect(*workers.pop(0))
            results.append((status, value))
            if status == "ok":
                for part in value[0]:
                    part["episodes"] = _unpack_episodes(part["episodes"])
                    part["violations"] = _unpack_violations(part["violations"])
    finally:
        _JOB = None
        for pid, r in workers:  # left early (an error here, Ctrl-C): no worker outlives the run
            _end(pid, r)
    return results


def replay_paths_jobs(
    configs: Sequence[Config],
    paths: Sequence[PathArg],
    jobs: int,
    *,
    strict: bool = False,
    settle_spans: int,
    window: Optional[Tuple[int, int]] = None,
    timelines: bool = False,
) -> List[Report]:
    """:func:`spanassert.replay.driver.replay_paths` over ``jobs`` processes (see the module doc;
    :func:`refusal` must have said yes). Raises :class:`spanassert.otlp.OTLPInputError` under
    ``strict`` as the one-process run does."""
    from ..otlp import OTLPInputError

    global _JOB
    # Under --strict the first bad input stops the run, as in one process: no shard route there.
    exact = strict
    while True:
        _JOB = {"configs": list(configs), "paths": list(paths), "strict": strict, "settle_spans": settle_spans,
                "window": window, "timelines": timelines, "jobs": jobs, "exact": exact}
        results = _run_shards(jobs)
        if all(status != "diverged" for status, _ in results):
            break
        exact = True  # a shard found a line the others took otherwise: all again, each line decoded whole
    for status, value in results:
        if status == "strict":
            raise OTLPInputError(value)
    shards = [value for _, value in results]
    reports = []
    for i, config in enumerate(configs):
        rep = Report(config)
        rep.window = window
        rep.issues = list(shards[0][2])
        _merge(rep, [parts[i] for parts, _, _ in shards], [keys[i] for _, keys, _ in shards])
        rep.drop_out_of_window()
        rep.mark_input_gaps()
        reports.append(rep)
    return reports


__all__ = ["WorkerFailed", "refusal", "replay_paths_jobs", "shard_of"]
