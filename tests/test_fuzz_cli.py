"""The front doors under fuzzing, as a small seeded corpus (`make test`): mutated real exports into
`spanassert replay` (every form it reads), hostile span values, hostile tool names into `spanassert
init --from-trace`, and mutated request bodies into serve's OTLP/HTTP intake. The properties and
the mutators are in tests/fuzz_cli.py; tests/stress/test_fuzz_cli.py runs them at size."""
from __future__ import annotations

import gzip
import random
import subprocess
import sys
from typing import Any, Iterator

import pytest

from fuzz_cli import (
    FORMS,
    LINES,
    RECORDED,
    RULES,
    baseline,
    init_problems,
    mutate_bytes,
    mutate_spans,
    mutate_tools,
    replay_problems,
    serve_problems,
)


def test_every_form_of_the_recorded_export_gives_the_same_verdicts() -> None:
    # The corpus is sound: the undamaged file passes every property, in every form.
    assert sorted(set(baseline().values())) == ["failed", "not_applicable", "passed"]
    for name, (data, suffix) in FORMS.items():
        assert replay_problems(data, suffix) == [], name


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("form", sorted(FORMS))
def test_mutated_exports_keep_every_replay_property(form: str, seed: int) -> None:
    rng = random.Random(f"{form}-{seed}")
    data, suffix = FORMS[form]
    mutated = mutate_bytes(rng, data, form)
    if form == "jsonl.gz" and seed % 2:
        mutated = gzip.compress(mutate_bytes(rng, FORMS["jsonl"][0], "jsonl"))
    assert replay_problems(mutated, suffix) == []


@pytest.mark.parametrize("seed", range(8))
def test_hostile_span_values_keep_every_replay_property(seed: int) -> None:
    assert replay_problems(mutate_spans(random.Random(seed)), ".jsonl") == []


@pytest.mark.parametrize("seed", range(8))
def test_hostile_tool_names_and_arguments_draft_a_rules_file_that_loads(seed: int) -> None:
    assert init_problems(mutate_tools(random.Random(seed))) == []


def test_a_damaged_export_exits_by_the_documented_codes_in_a_real_process(tmp_path: Any) -> None:
    # One run as a real process: the exit code and stderr the shell sees.
    bad = tmp_path / "damaged.jsonl"
    data = bytearray(RECORDED.read_bytes())
    data[len(data) // 2:len(data) // 2 + 40] = b"\xff" * 40
    bad.write_bytes(bytes(data[: len(data) - 100]))
    proc = subprocess.run([sys.executable, "-m", "spanassert", "replay", str(bad), "--config", str(RULES)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert f"{bad}:" in proc.stderr and "bad input record(s) were skipped and the rest checked; exit 2" in proc.stderr


@pytest.fixture(scope="module")
def receiver() -> Iterator[Any]:
    import io

    from spanassert.config import load_config
    from spanassert.serve import Receiver, ServeOptions

    options = ServeOptions(grpc_endpoint=None, http_endpoint="127.0.0.1:0", report_json="in memory", quiet=True,
                           settle=0.05, max_request_bytes=1 << 20)
    rx = Receiver(load_config(RULES), options, out=io.StringIO())
    rx.start()
    yield rx
    rx.stop()


@pytest.mark.parametrize("seed", range(12))
def test_mutated_request_bodies_get_an_answer_and_serve_stays_healthy(receiver: Any, seed: int) -> None:
    import json

    from fuzz_cli import proto_form

    rng = random.Random(seed)
    line = rng.choice(LINES)
    if seed % 2:
        body, ctype = mutate_bytes(rng, line, "jsonl"), "application/json"
    else:
        body, ctype = mutate_bytes(rng, proto_form(json.loads(line)), "binpb"), "application/x-protobuf"
    encoding = None
    if seed % 3 == 0:
        body, encoding = gzip.compress(body), "gzip"
    assert serve_problems(receiver.http_address, body, ctype, encoding) == []
    health = receiver.health()
    assert health["status"] == "ok" and health["engine_alive"] and health["internal_errors"] == 0


def _recorded_with(old: str, new: str, where: str = '"name":"execute_tool') -> bytes:
    lines = RECORDED.read_text(encoding="utf-8").splitlines()
    at = next(i for i, line in enumerate(lines) if where in line)
    lines[at] = lines[at].replace(old, new, 1)
    return ("\n".join(lines) + "\n").encode()


FOUND = {  # inputs fuzzing found (docs in /work/notes/s8/fuzz8.md); each broke a property before its fix
    "a 5000-digit JSON number (the rest of the file was lost)": (
        _recorded_with('"startTimeUnixNano":"', '"x":' + "9" * 5000 + ',"startTimeUnixNano":"'), ".jsonl"),
    "a 400-digit end time (internal error: OverflowError)": (
        _recorded_with('"endTimeUnixNano":"', '"endTimeUnixNano":"' + "9" * 400), ".jsonl"),
    "a negative start time, gzip'd": (
        gzip.compress(_recorded_with('"startTimeUnixNano":"', '"startTimeUnixNano":"-')), ".jsonl.gz"),
}


@pytest.mark.parametrize("name", sorted(FOUND))
def test_inputs_fuzzing_found_keep_every_replay_property(name: str) -> None:
    data, suffix = FOUND[name]
    assert replay_problems(data, suffix) == []


def test_a_tool_name_with_a_bidi_override_drafts_without_raw_controls() -> None:
    data = _recorded_with('"name":"execute_tool ', '"name":"execute_tool \\u202e')
    data = data.replace(b'"stringValue":"lookup_order"', b'"stringValue":"\\u202elookup_order"')
    assert init_problems(data) == []


@pytest.mark.parametrize("seed", range(16))
def test_rules_files_with_hostile_values_load_or_are_refused_specifically(seed: int) -> None:
    from fuzz_cli import mutate_rules, rules_problems

    assert rules_problems(mutate_rules(random.Random(seed)), untrusted=bool(seed % 2)) == []


def test_c1_and_bidi_characters_in_a_tool_name_are_escaped_in_the_json_report_too() -> None:
    # fuzz8: `replay --format json` (json.dumps(ensure_ascii=False)) printed U+009B (an 8-bit CSI
    # to some terminals), U+202E, U+0085 and U+2028 from a tool name raw on stdout. They are now
    # \\u escapes: the same document once parsed.
    import json

    from fuzz_cli import run_cli

    data = RECORDED.read_bytes().replace(b"track_shipment", b"track_shipment\\u009b2J\\u202eX\\u0085\\u2028")
    assert replay_problems(data, ".jsonl") == []
    import os
    import tempfile

    fd, path = tempfile.mkstemp(suffix=".jsonl")
    os.write(fd, data)
    os.close(fd)
    try:
        code, out, _ = run_cli(["replay", path, "--config", str(RULES), "--format", "json"])
    finally:
        os.unlink(path)
    assert code == 1 and "\\u009b2J\\u202eX\\u0085\\u2028" in out
    messages = [r["message"] for ep in json.loads(out)["episodes"] for r in ep["results"]]
    assert any("track_shipment\x9b2J\u202eX\x85\u2028" in m for m in messages)
