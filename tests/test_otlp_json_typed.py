"""The typed JSON Lines decoder (msgspec) gives exactly the records of the careful decoder, or
refuses the line (None) and leaves it to that decoder, whose records and error wording then stand.

Held line by line: on the exporters' own output (which it must accept: otherwise it would be an
unused path), on hand-written variants, and on generated mutations of a valid line."""
from __future__ import annotations

import copy
from dataclasses import fields
import json
import os
from pathlib import Path
import subprocess
import sys
from typing import Any, List, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spanassert.core.model import SpanRecord
from spanassert.otlp import SpanDecodeError, read_spans, records_from_json

pytest.importorskip("msgspec")  # a core dependency; a venv made before it was added lacks it

from spanassert.otlp.json_typed import records_from_line  # noqa: E402

from test_otlp_fuzz import ALL_PATHS, VALID, json_values  # noqa: E402
from test_otlp_json import PUBLIC_EXAMPLE  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _fields(r: SpanRecord) -> tuple:
    out = []
    for slot in [f.name for f in fields(SpanRecord)]:  # a native class has no __slots__
        v = getattr(r, slot)
        if slot == "events":
            v = (type(v), [(e.name, e.timestamp, dict(e.attributes), type(e.attributes)) for e in v])
        out.append((slot, v, type(v)))
    return tuple(out)


def _careful(line: bytes) -> "tuple[Optional[List[SpanRecord]], List[str]]":
    """What the reader did for a line before the typed path: json.loads, then records_from_json."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None, ["not JSON"]
    errors: List[SpanDecodeError] = []
    try:
        recs = records_from_json(obj, "f:1", errors=errors)
    except (SpanDecodeError, RecursionError) as exc:
        return None, [str(exc)]
    return recs, [str(e) for e in errors]


def _same_or_refused(line: bytes) -> bool:
    """True when the typed decoder accepted the line (and agreed with the careful one)."""
    typed = records_from_line(line, "f:1")
    if typed is None:
        return False
    careful, errors = _careful(line)
    assert not errors, f"the typed path accepted a line the careful one reports: {errors}"
    assert careful is not None
    assert [_fields(r) for r in typed] == [_fields(r) for r in careful]
    # Spans of one resource block share its attributes (assembly relies on it to find local roots).
    assert [a.resource is b.resource for a, b in zip(typed, typed[1:])] == \
        [a.resource is b.resource for a, b in zip(careful, careful[1:])]
    return True


def _line(doc: Any) -> bytes:
    return json.dumps(doc).encode() + b"\n"


def test_the_exporters_output_is_accepted_and_decodes_alike(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from data import agent_spans, write_files
    finally:
        sys.path.pop(0)
    files = write_files(agent_spans(6), str(tmp_path))
    lines = Path(files["jsonl"]).read_bytes().splitlines(keepends=True)
    assert lines and all(_same_or_refused(line) for line in lines)
    recorded = (ROOT / "examples" / "recorded" / "support-agent.jsonl").read_bytes().splitlines(keepends=True)
    assert recorded and all(_same_or_refused(line) for line in recorded)


def test_the_public_example_with_every_value_type_is_accepted() -> None:
    assert _same_or_refused(_line(PUBLIC_EXAMPLE))
    assert _same_or_refused(_line(VALID))


@pytest.mark.parametrize("mutate", [
    lambda s: s.update(trace_id=s.pop("traceId")),  # snake_case keys: the careful path reads them
    lambda s: s.update(parent_span_id=s.pop("parentSpanId")),  # skipped as unknown would make a root
    lambda s: s.update(kind="SPAN_KIND_SERVER"),
    lambda s: s.update(status={"code": "STATUS_CODE_ERROR"}),
    lambda s: s.update(parentSpanId="0" * 16),  # all-zero parent: no parent, by the careful path
    lambda s: s.update(startTimeUnixNano=1.5e18),
    lambda s: s.update(name=None),
    lambda s: s["attributes"].append({"key": "x", "value": {"intValue": "1", "stringValue": "a"}}),
    lambda s: s["attributes"].append({"key": "x"}),
    lambda s: s["attributes"].append({"key": "x", "value": {"stringValue": None}}),
    lambda s: s["attributes"].append({"key": "x", "value": {"intValue": "nope"}}),
    lambda s: s["attributes"].append({"key": "x", "value": {"doubleValue": "Infinity"}}),
    lambda s: s["attributes"].append({"key": "x", "value": {"arrayValue": {"values": [{"intValue": "x"}]}}}),
    lambda s: s.update(traceId="ZZ" * 16),
    lambda s: s.update(spanId=base64_id()),
    lambda s: s.update(extra={"a": 1}),
])
def test_variants_are_refused_or_decoded_alike(mutate: Any) -> None:
    doc = copy.deepcopy(VALID)
    mutate(doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0])
    _same_or_refused(_line(doc))


@pytest.mark.parametrize("mutate, accepted", [
    # The ids of a block are checked together when all are canonical; any other id sends the block
    # through the per-id check, which normalises what the careful path normalises.
    (lambda s: s.update(traceId=s["traceId"].upper()), True),
    (lambda s: s.update(spanId=s["spanId"].upper()), True),
    (lambda s: s.update(parentSpanId=s["parentSpanId"].upper()), True),
    (lambda s: s.update(spanId=s["spanId"][:8] + " " + s["spanId"][9:]), False),  # fromhex skips spaces
    (lambda s: s.update(spanId=s["spanId"][:-1]), False),
    (lambda s: s.update(spanId=s["spanId"] + "a", parentSpanId=s["parentSpanId"][:-1]), False),  # odd + odd
    (lambda s: s.update(traceId="0" * 32), False),
    (lambda s: s.update(spanId="0" * 16), False),
    (lambda s: s.update(parentSpanId=""), True),
])
def test_ids_checked_a_block_at_a_time_decode_as_the_careful_path_does(mutate: Any, accepted: bool) -> None:
    doc = copy.deepcopy(VALID)
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans.append({**copy.deepcopy(spans[0]), "spanId": "aaaabbbbccccdddd"})  # a canonical neighbour
    mutate(spans[0])
    assert _same_or_refused(_line(doc)) is accepted


def base64_id() -> str:
    import base64

    return base64.b64encode(bytes.fromhex("eee19b7ec3c1b174")).decode()


def test_a_refused_line_is_read_the_careful_way_with_the_same_records_and_issues(tmp_path: Path) -> None:
    bad = copy.deepcopy(VALID)
    bad["resourceSpans"][0]["scopeSpans"][0]["spans"].append({"traceId": "zz", "spanId": "eee19b7ec3c1b175"})
    snake = copy.deepcopy(VALID)
    span = snake["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["parent_span_id"] = span.pop("parentSpanId")
    path = tmp_path / "in.jsonl"
    path.write_bytes(_line(VALID) + _line(bad) + _line(snake) + b"{not json\n")
    script = ("import sys, json, dataclasses; from spanassert.otlp import read_spans; issues = []; "
              "recs = list(read_spans([sys.argv[1]], on_issue=issues.append)); "
              "print(json.dumps([[repr(getattr(r, f.name)) for f in dataclasses.fields(r) if f.name != 'events'] "
              "+ [repr([(e.name, e.timestamp, e.attributes) for e in r.events])] for r in recs])); "
              "print(json.dumps([i.format() for i in issues]))")
    outs = []
    for env_extra in ({"SPANASSERT_TYPED_JSON": "always"}, {"SPANASSERT_TYPED_JSON": "never"}):
        env = {**os.environ, **env_extra}
        outs.append(subprocess.run([sys.executable, "-c", script, str(path)], env=env, capture_output=True,
                                   text=True, check=True).stdout)
    assert outs[0] == outs[1]
    records, issues = (json.loads(x) for x in outs[0].splitlines())
    assert len(records) == 3 and len(issues) == 2 and "traceId" in issues[0] and "invalid JSON" in issues[1]
    assert any("'eee19b7ec3c1b173'" in r for r in records[-1])  # the snake_case parent was read


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(ALL_PATHS), json_values), min_size=1, max_size=3))
def test_mutated_valid_lines_are_refused_or_decoded_alike(mutations: Any) -> None:
    doc = copy.deepcopy(VALID)
    for path, value in mutations:
        target = doc
        try:
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    _same_or_refused(_line(doc))


def test_msgspec_is_a_core_dependency() -> None:
    from importlib import metadata

    requires = metadata.requires("spanassert") or []
    core = [r for r in requires if "extra ==" not in r]
    assert any(r.replace(" ", "").startswith("msgspec") for r in core), core


def test_the_reader_takes_the_typed_path_past_the_first_mebibyte(tmp_path: Path, monkeypatch: Any) -> None:
    import spanassert.otlp.json_typed as typed_module

    line = _line(VALID)
    small = tmp_path / "small.jsonl"
    small.write_bytes(line * 10)
    big = tmp_path / "big.jsonl"
    n = (1 << 20) // len(line) + 100
    big.write_bytes(line * n)
    # A process that has not imported the typed decoder (msgspec): a small file is read the careful
    # way, without the import; a long one imports it once past the first mebibyte. (A fresh process:
    # a compiled module taken out of sys.modules cannot be imported again.)
    script = (
        "import sys\n"
        "from spanassert.otlp import read_spans\n"
        f"assert len(list(read_spans([{str(small)!r}]))) == 10\n"
        f"assert {typed_module.__name__!r} not in sys.modules, 'imported for a small file'\n"
        f"assert len(list(read_spans([{str(big)!r}]))) == {n}\n"
        f"assert {typed_module.__name__!r} in sys.modules, 'not switched past the first mebibyte'\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "SPANASSERT_TYPED_JSON"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    # Once it is imported (an earlier input in this process), every line takes it from the first.
    calls: List[int] = []
    real = typed_module.records_from_line
    monkeypatch.setattr(typed_module, "records_from_line", lambda line, source: calls.append(1) or real(line, source))
    assert len(list(read_spans([small]))) == 10 and len(calls) == 10
    calls.clear()
    assert len(list(read_spans([big]))) == n and len(calls) == n
    monkeypatch.setenv("SPANASSERT_TYPED_JSON", "never")
    calls.clear()
    assert len(list(read_spans([small]))) == 10 and not calls
    monkeypatch.setenv("SPANASSERT_TYPED_JSON", "always")
    calls.clear()
    assert len(list(read_spans([small]))) == 10 and len(calls) == 10


def test_the_struct_field_positions_json_typed_reads_are_the_structs_own() -> None:
    """Compiled, json_typed reads a struct's fields as one tuple (msgspec.structs.astuple), by position."""
    from spanassert.otlp.json_structs import _AnyValue, _Span

    assert _Span.__struct_fields__[:10] == ("traceId", "spanId", "parentSpanId", "name", "kind", "startTimeUnixNano",
                                            "endTimeUnixNano", "attributes", "events", "status")
    assert _Span.__struct_fields__[13:15] == ("droppedAttributesCount", "droppedEventsCount")
    assert _AnyValue.__struct_fields__ == ("stringValue", "intValue", "boolValue", "doubleValue", "arrayValue",
                                           "kvlistValue", "bytesValue", "stringValueStrindex")
