"""The front doors under seeded fuzzing at size (`make stress`; short sizes in `make test`): mutated
real exports in every form into `spanassert replay`, hostile span values, hostile tool names into
`spanassert init --from-trace`, mutated OTLP/HTTP bodies into serve, and a gzip bomb against the
reader's record bound. Mutators and properties: tests/fuzz_cli.py. Each run is bounded by its
example count and seeded (hypothesis draws the seeds, derandomized: the same inputs every run)."""
from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import time
import zlib
from typing import Any, Callable, Dict, List

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz_cli import (
    FORMS,
    LINES,
    RULES,
    init_problems,
    mutate_bytes,
    mutate_spans,
    mutate_tools,
    proto_form,
    replay_problems,
    serve_problems,
)

from .report import record


def _seeded(case: str, n: int, check: Callable[[int], List[str]]) -> None:
    """``check(seed)`` for ``n`` seeds; every problem is collected, then the case fails listing them."""
    found: Dict[int, List[str]] = {}
    t0 = time.perf_counter()
    tried = [0]

    @settings(max_examples=n, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.integers(0, 2 ** 32 - 1))
    def run(seed: int) -> None:
        tried[0] += 1
        problems = check(seed)
        if problems:
            found[seed] = problems

    run()
    record(case, inputs=tried[0], exceptions_escaped=len(found), seconds=time.perf_counter() - t0,
           note=f"{len(found)} input(s) broke a property")
    assert found == {}, "\n".join(f"seed {k}: {v}" for k, v in list(found.items())[:5])


def test_mutated_exports_in_every_form_keep_every_replay_property(sizes: Any) -> None:
    import random

    names = sorted(FORMS)

    def check(seed: int) -> List[str]:
        rng = random.Random(seed)
        form = names[seed % len(names)]
        data, suffix = FORMS[form]
        mutated = mutate_bytes(rng, data, form)
        if form == "jsonl.gz" and rng.random() < 0.5:
            mutated = gzip.compress(mutate_bytes(rng, FORMS["jsonl"][0], "jsonl"))
        return replay_problems(mutated, suffix)

    _seeded("fuzz: mutated exports into replay (5 forms)", sizes.pick(20, 1500), check)


def test_hostile_span_values_keep_every_replay_property(sizes: Any) -> None:
    import random

    _seeded("fuzz: hostile span values into replay", sizes.pick(8, 400),
            lambda seed: replay_problems(mutate_spans(random.Random(seed)), ".jsonl"))


def test_hostile_tool_names_draft_rules_files_that_load(sizes: Any) -> None:
    import random

    _seeded("fuzz: hostile tool names into init --from-trace", sizes.pick(8, 400),
            lambda seed: init_problems(mutate_tools(random.Random(seed))))


def test_mutated_request_bodies_get_answers_and_serve_stays_healthy(sizes: Any) -> None:
    import random

    from spanassert.config import load_config
    from spanassert.serve import Receiver, ServeOptions

    options = ServeOptions(grpc_endpoint=None, http_endpoint="127.0.0.1:0", report_json="in memory", quiet=True,
                           settle=0.05, max_request_bytes=1 << 20)
    rx = Receiver(load_config(RULES), options, out=io.StringIO())
    rx.start()
    protos = [proto_form(json.loads(line)) for line in LINES]
    try:
        def check(seed: int) -> List[str]:
            rng = random.Random(seed)
            i = rng.randrange(len(LINES))
            if rng.random() < 0.5:
                body, ctype = mutate_bytes(rng, LINES[i], "jsonl"), "application/json"
            else:
                body, ctype = mutate_bytes(rng, protos[i], "binpb"), "application/x-protobuf"
            encoding = None
            if rng.random() < 0.25:
                body, encoding = gzip.compress(body), "gzip"
            problems = serve_problems(rx.http_address, body, ctype, encoding)
            health = rx.health()
            if health["status"] != "ok" or health["internal_errors"]:
                problems.append(f"serve unhealthy after the request: {health}")
            return problems

        _seeded("fuzz: mutated OTLP/HTTP bodies into serve", sizes.pick(30, 2000), check)
    finally:
        rx.stop()


def test_rules_files_with_hostile_values_load_or_are_refused_specifically(sizes: Any) -> None:
    import random

    from fuzz_cli import mutate_rules, rules_problems

    _seeded("fuzz: hostile values in rules files", sizes.pick(40, 3000),
            lambda seed: rules_problems(mutate_rules(random.Random(seed)), untrusted=bool(seed % 2)))


def test_a_gzip_bomb_line_is_bounded_and_the_lines_after_it_are_read(sizes: Any, tmp_path: Any) -> None:
    """A gzip file holding one line far past the reader's bound (2.5 times it; the bound is 1 GiB, short
    runs lower it) between valid lines: one specific error at its line, every other span read, memory
    bounded by three times the bound, whatever the line's length. readline joins the pieces of the cut
    line (twice the bound at its peak): 2,065 MiB measured when this test runs alone, 2,814 MiB in two
    whole `make stress` runs, for a 1.5 GiB and a 2.5 GiB line alike (why the whole run differs is not
    known; the peak does not grow with the line); before the
    bound, the line was read whole and then decoded: 1.5 GB RSS for a 500 MB line, 3 times any line."""
    from spanassert.otlp import formats

    line_bytes = sizes.pick(24 << 20, (formats.MAX_RECORD_BYTES * 5) // 2)
    path = tmp_path / "bomb.jsonl.gz"
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as f:
        f.write(c.compress(LINES[0] + b"\n" + b'{"resourceSpans":[{"x":"'))
        chunk = b"a" * (1 << 20)
        for _ in range(line_bytes >> 20):
            f.write(c.compress(chunk))
        f.write(c.compress(b'"}]}\n' + b"\n".join(LINES[1:]) + b"\n"))
        f.write(c.flush())
    t0 = time.perf_counter()
    script = ("import sys; from spanassert.otlp import formats, read_spans\n"
              "formats.MAX_RECORD_BYTES = int(sys.argv[2])\n"
              "issues = []\n"
              "n = sum(1 for _ in read_spans(sys.argv[1], on_issue=issues.append))\n"
              "print(n, [(i.line, i.severity, i.reason.split(',')[0]) for i in issues])\n")
    limit = sizes.pick(8 << 20, formats.MAX_RECORD_BYTES)
    proc = subprocess.Popen([sys.executable, "-c", script, str(path), str(limit)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    out = proc.stdout.read().decode() if proc.stdout else ""
    err = proc.stderr.read().decode() if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0, err
    peak_kib = usage.ru_maxrss
    record("fuzz: gzip bomb line into the JSON Lines reader", inputs=1, seconds=time.perf_counter() - t0,
           peak_memory=f"{peak_kib // 1024} MiB", memory_bound=f"3 x {limit // (1 << 20)} MiB record + 400 MiB",
           note=f"{path.stat().st_size} B gzip, a {line_bytes >> 20} MiB line")
    assert out.strip() == f"{len(LINES)} [(2, 'error', 'line is {line_bytes + 29} bytes long')]"
    assert peak_kib < (3 * limit + (400 << 20)) // 1024, f"peak RSS {peak_kib} KiB"
