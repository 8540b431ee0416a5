"""Fuzzing the product's front doors with mutated real exports, and the properties every input must
keep (fuzz8). Shared by tests/test_fuzz_cli.py (a small seeded corpus in `make test`) and
tests/stress/test_fuzz_cli.py (bounded, seeded runs at size in `make stress`).

The seed is ``examples/recorded/support-agent.jsonl`` (written by the real exporter), in five forms
`replay` reads: OTLP JSON Lines, one whole OTLP JSON document, a protobuf ``TracesData`` (.binpb),
the Collector's length-prefixed frames and gzip'd JSON Lines. Mutators:

- ``mutate_bytes``: flips, inserts, deletes, truncations, duplications and hostile splices (huge
  numbers, deep nesting, invalid UTF-8, NUL bytes, control characters, ids of the wrong length or
  case, enormous strings) at the byte level, or in place of a JSON value;
- ``mutate_spans``: valid OTLP JSON whose attribute values are hostile (numbers past int64 or
  fixed64, NaN and infinities, JSON text with 400-digit numbers or 5,000 levels of nesting, 2 MB
  strings, control and bidi characters in tool names, arguments, results and answers);
- ``mutate_tools``: tool names and arguments that are YAML syntax, control or bidi characters, for
  ``init --from-trace``.

The properties (``replay_problems``, ``init_problems``, ``serve_problems``): the process never
tracebacks nor reports an internal error; `replay` exits 0, 1 or 2 (docs/running.md); no raw control
character reaches stdout (text or JSON report) or stderr; a damaged file (one that reports an input issue) never
turns a rule that failed or was inconclusive on the undamaged file into `passed`; `init` writes a
draft that loads; serve answers every request with a status below 500 (or 503) and stays healthy.
"""
from __future__ import annotations

import contextlib
import copy
import gzip
import io
import json
import os
import random
import re
import struct
import tempfile
import traceback
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "examples" / "recorded" / "support-agent.jsonl"
RULES = ROOT / "examples" / "rules.yaml"
SRC = RECORDED.read_bytes()
LINES = [line for line in SRC.split(b"\n") if line.strip()]
DOCS = [json.loads(line) for line in LINES]

# What may not reach a terminal raw (core/escaping.escape_control's set; "\n" ends lines).
UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def proto_form(doc: Dict[str, Any]) -> bytes:
    """The protobuf form of one OTLP JSON document (hex ids, as OTLP JSON writes them)."""
    from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

    msg = TracesData()
    for rs in doc["resourceSpans"]:
        r = msg.resource_spans.add()
        for a in rs["resource"]["attributes"]:
            r.resource.attributes.add(key=a["key"]).value.string_value = a["value"].get("stringValue", "")
        for ss in rs["scopeSpans"]:
            s = r.scope_spans.add()
            s.scope.name = ss["scope"]["name"]
            for sp in ss["spans"]:
                p = s.spans.add()
                p.trace_id = bytes.fromhex(sp["traceId"])
                p.span_id = bytes.fromhex(sp["spanId"])
                if sp.get("parentSpanId"):
                    p.parent_span_id = bytes.fromhex(sp["parentSpanId"])
                p.name = sp["name"]
                p.kind = sp.get("kind", 0)
                p.start_time_unix_nano = int(sp["startTimeUnixNano"])
                p.end_time_unix_nano = int(sp["endTimeUnixNano"])
                p.status.code = sp.get("status", {}).get("code", 0)
                p.status.message = sp.get("status", {}).get("message", "")
                for a in sp.get("attributes", []):
                    v = a["value"]
                    kv = p.attributes.add(key=a["key"])
                    if "stringValue" in v:
                        kv.value.string_value = v["stringValue"]
                    elif "arrayValue" in v:
                        for item in v["arrayValue"]["values"]:
                            kv.value.array_value.values.add().string_value = item.get("stringValue", "")
    return msg.SerializeToString()


def forms() -> Dict[str, Tuple[bytes, str]]:
    """The recorded export in every form: name -> (bytes, file suffix)."""
    pbs = [proto_form(d) for d in DOCS]
    whole = {"resourceSpans": [rs for d in DOCS for rs in d["resourceSpans"]]}
    return {
        "jsonl": (SRC, ".jsonl"),
        "json": (json.dumps(whole, indent=2).encode(), ".json"),
        "binpb": (proto_form(whole), ".binpb"),
        "framed": (b"".join(struct.pack(">I", len(p)) + p for p in pbs), ".pb"),
        "jsonl.gz": (gzip.compress(SRC), ".jsonl.gz"),
    }


FORMS = forms()

HOSTILE = [
    b'"traceId":"zz"', b'"spanId":12', b"\xff\xfe", b"[" * 5000, b'{"a":' * 3000, b"null", b"\x00" * 8,
    b'{"intValue":"99999999999999999999999999999999"}', b'"startTimeUnixNano":"-1"', b'"endTimeUnixNano":"1e400"',
    b"9" * 5000, b'"' + b"9" * 400 + b'"', b'"x' + b"A" * 300_000 + b'"', b"\xed\xa0\x80", b"\\ud800", b"\\u0000",
    b"\x1b[31m", b"\\u001b]0;pwn\\u0007", b"1e999999", b'"kind":99999999999999999999', b'"flags":-1',
    b'"droppedAttributesCount":1e300', b'"traceId":"' + b"0" * 32 + b'"', b'"spanId":"' + b"0" * 16 + b'"',
    b'"traceId":"6EF809DACA1AE06C7DC1DDDCA96E106F"', b'"spanId":"abc"', b'"traceId":"' + b"a" * 64 + b'"',
    b"\xc2\x85", b"\xe2\x80\xa8", b'"\\u202e\\u0007\\u009b"', b"-0", b"NaN", b"Infinity",
    b'"status":{"code":"STATUS_CODE_ERROR"}', b'"status":{"code":7}',
]
SMALL_VALUES = [b'"s"', b"1", b"-1", b"true", b"[]", b"{}", b"null", b"1.5", b'"' + b"9" * 40 + b'"',
                b'[{"key":"k"}]']


def mutate_bytes(rng: random.Random, data: bytes, form: str) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.choice(["flip", "insert", "delete", "truncate", "dup", "splice", "splice", "splice"])
        pos = rng.randint(0, max(0, len(out) - 1))
        if op == "flip" and out:
            out[pos] ^= rng.randint(1, 255)
        elif op == "insert":
            out[pos:pos] = bytes(rng.randint(0, 255) for _ in range(rng.randint(1, 8)))
        elif op == "delete":
            del out[pos:pos + rng.randint(1, 64)]
        elif op == "truncate":
            del out[pos:]
        elif op == "dup":
            out[pos:pos] = out[pos:pos + rng.randint(1, 400)]
        elif form in ("jsonl", "json") and rng.random() < 0.7:
            # In place of one JSON value (after a `":`): a hostile or a wrong-typed one.
            starts = [m.end() for m in re.finditer(rb'":', bytes(out))]
            if starts:
                p = rng.choice(starts)
                end = p
                while end < len(out) and out[end] not in b",}]":
                    end += 1
                out[p:end] = rng.choice(HOSTILE) if rng.random() < 0.6 else rng.choice(SMALL_VALUES)
        else:
            out[pos:pos] = rng.choice(HOSTILE)
    return bytes(out)


def _deep(n: int) -> str:
    return "[" * n + "]" * n


JSON_TEXTS = [
    '{"order_id": "ORD-1", "amount": ' + "9" * 400 + "}", '{"amount": 1e999}', '{"amount": NaN}',
    '{"amount": -Infinity}', _deep(5000), _deep(900), '{"a":' * 900 + "1" + "}" * 900, '{"order_id": "ORD-\\ud800"}',
    '"\\u0000"', '{"amount": ' + "9" * 5000 + "}", '{"order_id": "ORD-1", "amount": 5, "amount": 900}',
    "[" + ",".join(["1"] * 100000) + "]", '{"status": "ok", "total": ' + "9" * 4000 + "}",
    '{"order_id": "ORD-1\\n\\u001b[31m", "status": "x", "total": 1e308}', '{"total": 1e-400}',
    '"' + "A" * 2_000_000 + '"',
    '[{"role":"assistant","parts":[{"type":"text","content":"x\\u001b]0;pwn\\u0007"}]}]',
    '[{"role":"assistant","parts":' + _deep(950) + "}]",
    '[{"role":"assistant","parts":[{"type":"tool_call","id":1,"name":["x"]}]}]',
]
KEYS = ["gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "gen_ai.output.messages", "gen_ai.input.messages", "gen_ai.tool.name", "gen_ai.request.model",
        "gen_ai.response.model", "gen_ai.operation.name", "error.type", "gen_ai.agent.name", "gen_ai.conversation.id",
        "gen_ai.response.finish_reasons", "llm.token_count.total", "openinference.span.kind", "input.value",
        "output.value", "tool.name", "gen_ai.tool.call.id"]


def _any_value(rng: random.Random) -> Dict[str, Any]:
    r = rng.random()
    if r < 0.25:
        return {"stringValue": rng.choice(JSON_TEXTS)}
    if r < 0.4:
        return {"intValue": rng.choice(["9" * 19, "-" + "9" * 19, "9" * 30, "9" * 4000, str(1 << 64), "-1", "0"])}
    if r < 0.5:
        return {"doubleValue": rng.choice(["NaN", "Infinity", "-Infinity", 1e308, -0.0, 5e-324])}
    if r < 0.6:
        return {"boolValue": rng.choice([True, False])}
    if r < 0.7:
        return {"arrayValue": {"values": [{"intValue": "9" * 30}, {"stringValue": "\x1b[2J"}, {"doubleValue": "NaN"}]}}
    if r < 0.8:
        return {"kvlistValue": {"values": [{"key": "\n\x1b", "value": {"stringValue": "v"}}]}}
    if r < 0.9:
        return {"bytesValue": "AAAA"}
    return {"stringValue": rng.choice(["\x1b[31mdelete_customer\n", "issue_refund\u202e", "a" * 2_000_000, "", " ",
                                       "execute_tool", "lookup_order"])}


def _spans(docs: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [sp for d in docs for rs in d["resourceSpans"] for ss in rs["scopeSpans"] for sp in ss["spans"]]


def mutate_spans(rng: random.Random) -> bytes:
    docs = copy.deepcopy(DOCS)
    spans = _spans(docs)
    for _ in range(rng.randint(1, 4)):
        sp = rng.choice(spans)
        r = rng.random()
        if r < 0.7:
            key = rng.choice(KEYS)
            attrs = sp.setdefault("attributes", [])
            same = [a for a in attrs if a["key"] == key]
            if same:
                same[0]["value"] = _any_value(rng)
            else:
                attrs.append({"key": key, "value": _any_value(rng)})
        elif r < 0.8:
            sp["name"] = rng.choice(["\x1b[2J\nexecute_tool x", "execute_tool " + "a" * 100000, "", "chat \u2028"])
        elif r < 0.9:
            sp["status"] = rng.choice([{"code": 2, "message": "\x1b[31m" + "m" * 10000}, {"code": 1}, {"code": 2}])
        else:
            sp["events"] = [{"name": "gen_ai.choice", "timeUnixNano": sp["startTimeUnixNano"],
                             "attributes": [{"key": rng.choice(KEYS), "value": _any_value(rng)}]}] * rng.randint(1, 3)
    return "".join(json.dumps(d) + "\n" for d in docs).encode()


TOOL_NAMES = ["a: b", "*alias", "&anchor", "!tag", "{x}", "[y]", "- z", "# c", "'q'", '"dq"', "x\ny", "\x1b[31m", "yes",
              "null", "1e3", "0x10", "~", "@at", "`bt`", "%p", "a" * 300, "ü\u2028", "\u202etool", " lead", "trail ",
              "k: v\n- x", "\\", "\t", "?", "|", ">", "execute_tool", "<<", "=", "1:30", "2001-12-14", ".nan",
              "\ufeffbom", "\x00nul", "pay\x85"]


def mutate_tools(rng: random.Random) -> bytes:
    docs = copy.deepcopy(DOCS)
    spans = _spans(docs)
    tools = [sp for sp in spans if sp["name"].startswith("execute_tool")]
    for _ in range(rng.randint(1, 5)):
        sp = rng.choice(tools if rng.random() < 0.7 else spans)
        attrs = sp.setdefault("attributes", [])
        r = rng.random()
        if r < 0.4:
            name = rng.choice(TOOL_NAMES)
            for a in attrs:
                if a["key"] == "gen_ai.tool.name":
                    a["value"] = {"stringValue": name}
            sp["name"] = "execute_tool " + name
        elif r < 0.7:
            values = [1, "s", None, [1, "x"], {"k": rng.choice(TOOL_NAMES)}, 1e308, -1, True, "ORD-1"]
            args = {rng.choice(TOOL_NAMES): rng.choice(values) for _ in range(rng.randint(0, 4))}
            text = json.dumps(args) if rng.random() < 0.8 else rng.choice(JSON_TEXTS)
            attrs[:] = [a for a in attrs if a["key"] != "gen_ai.tool.call.arguments"]
            attrs.append({"key": "gen_ai.tool.call.arguments", "value": {"stringValue": text}})
        elif r < 0.85:
            attrs.append({"key": rng.choice(KEYS), "value": _any_value(rng)})
        else:
            for a in attrs:
                if a["key"] == "gen_ai.agent.name":
                    a["value"] = {"stringValue": rng.choice(TOOL_NAMES)}
    return "".join(json.dumps(d) + "\n" for d in docs).encode()


# -- running the doors ----------------------------------------------------------------------------


def _temp(data: bytes, suffix: str) -> str:
    fd, path = tempfile.mkstemp(prefix="spanassert-fuzz-", suffix=suffix)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def run_cli(argv: List[str]) -> Tuple[Any, str, str]:
    """``spanassert ARGV`` in this process: (exit code, stdout, stderr); an exception that escapes
    main() is returned as its traceback text in place of the exit code."""
    from spanassert.cli import main

    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code: Any = main(argv)
    except BaseException as exc:  # noqa: BLE001 - the property being checked
        code = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return code, out.getvalue(), err.getvalue()


def verdicts(doc: Dict[str, Any]) -> Dict[Tuple[str, str, str, int], str]:
    return {(ep["key"], r["test"], r["type"], r["index"]): r["verdict"]
            for ep in doc.get("episodes", []) for r in ep.get("results", [])}


_BASELINE: Dict[str, Dict[Tuple[str, str, str, int], str]] = {}


def baseline(rules: Path = RULES) -> Dict[Tuple[str, str, str, int], str]:
    """The verdicts of the undamaged export (the same in every form)."""
    key = str(rules)
    if key not in _BASELINE:
        code, out, err = run_cli(["replay", str(RECORDED), "--config", str(rules), "--format", "json"])
        assert code in (0, 1), err
        _BASELINE[key] = verdicts(json.loads(out))
    return _BASELINE[key]


def _internal(err: str) -> bool:
    # "could not read the file" is the reader's last resort: a reader bug, never a specific issue.
    return "internal error" in err or "Traceback (most recent call last)" in err or "could not read the file" in err


def replay_problems(data: bytes, suffix: str, rules: Path = RULES) -> List[str]:
    """What is wrong with `spanassert replay` on ``data``: [] when every property holds."""
    base = baseline(rules)
    path = _temp(data, suffix)
    extra = [path + ".html", path + ".xml", path + ".sarif"]
    problems: List[str] = []
    try:
        for fmt in ("json", "text"):
            argv = ["replay", path, "--config", str(rules), "--format", fmt]
            if fmt == "json":
                argv += ["--html", extra[0], "--junit", extra[1], "--sarif", extra[2]]
            code, out, err = run_cli(argv)
            if code not in (0, 1, 2):
                problems.append(f"{fmt}: exit {str(code)[-1500:]}")
                continue
            if _internal(err):
                problems.append(f"{fmt}: {err[-800:]}")
            if re.search(r'"internal_errors": [1-9]|"close_reason": "internal_error"', out):
                problems.append(f"{fmt}: a trace was closed by an internal error")
            for stream, text in (("stdout", out), ("stderr", err)):
                raw = UNSAFE.findall(text)
                if raw:
                    problems.append(f"{fmt}: raw control characters on {stream}: {raw[:5]!r}")
            if fmt == "text":
                continue
            try:
                doc = json.loads(out)
            except ValueError as exc:
                problems.append(f"json: the report does not parse: {exc}")
                continue
            if doc.get("issues"):
                # A damaged file may fail or be inconclusive; it never passes what the whole file did not.
                for k, v in verdicts(doc).items():
                    if v == "passed" and base.get(k) in ("failed", "inconclusive"):
                        problems.append(f"false green: {k} passed, {base[k]} on the undamaged file")
    finally:
        for p in [path, *extra]:
            with contextlib.suppress(OSError):
                os.unlink(p)
    return problems


def init_problems(data: bytes) -> List[str]:
    """What is wrong with `spanassert init --from-trace` on ``data`` (drafting to stdout)."""
    from spanassert.config import ConfigError, load_config

    path = _temp(data, ".jsonl")
    rules = path + ".rules.yaml"
    problems: List[str] = []
    try:
        code, out, err = run_cli(["init", "--from-trace", path])
        if code not in (0, 2):
            return [f"exit {str(code)[-1500:]}"]
        raw = UNSAFE.findall(out) + UNSAFE.findall(err)
        if raw:
            problems.append(f"raw control characters: {raw[:5]!r}")
        if code == 0:
            Path(rules).write_text(out, encoding="utf-8")
            try:
                load_config(rules)
            except ConfigError as exc:
                problems.append("the draft does not load: " + " | ".join(d.format() for d in exc.diagnostics[:3]))
    finally:
        for p in (path, rules):
            with contextlib.suppress(OSError):
                os.unlink(p)
    return problems


def post(address: str, body: bytes, content_type: str, encoding: Optional[str] = None) -> Tuple[Any, bytes]:
    import http.client

    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    headers = {"Content-Type": content_type}
    if encoding:
        headers["Content-Encoding"] = encoding
    try:
        conn.request("POST", "/v1/traces", body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    except (OSError, http.client.HTTPException) as exc:
        return repr(exc), b""
    finally:
        conn.close()


def serve_problems(address: str, body: bytes, content_type: str, encoding: Optional[str] = None) -> List[str]:
    """What is wrong with serve's answer to one OTLP/HTTP request (the receiver at ``address``)."""
    status, answer = post(address, body, content_type, encoding)
    if not isinstance(status, int):
        return [f"no answer: {status}"]
    if status >= 500 and status != 503:
        return [f"status {status}: {answer[:300]!r}"]
    if status >= 400 and content_type == "application/json":
        try:
            message = json.loads(answer)["message"]
        except (ValueError, KeyError, TypeError):
            return [f"status {status} without a JSON status message: {answer[:300]!r}"]
        if not message:
            return [f"status {status} with an empty message"]
    return []


# -- rules files ------------------------------------------------------------------------------------

RULES_FILES = [RULES, ROOT / "examples" / "openinference-rules.yaml"]
YAML_VALUES = [
    "!!python/object/apply:os.system ['true']", "!!binary aGk=", "!!set {a, b}", "!!omap [a: 1]",
    "!!timestamp 2001-12-14", "!!float 1", "!!str 1", "&a x", "*a", "*undefined", "9" * 5000, "9" * 30, ".inf",
    "-.inf", ".nan", "1e999", "0x1F",
    "0o17", "1:30", "2001-12-14", "~", "null", "yes", "no", "''", '"\\e[31m\\n"', '"\\u202e"', '"\\x00"', "[]", "{}",
    "[[[[[[[[[[[[[[]]]]]]]]]]]]]]", "{a: {b: {c: {}}}}", "'(a+)+$'", "'[z-a]'", "'(?P<x'", "a" * 5000, "- x", "? x",
    "{type: trace_max_steps, max: 1}", "[1, 2, 3]", "{<<: {type: x}}", "-1", "0", "1.5", "true", "{$ref: '#/x'}",
    "{$ref: 'http://x'}", "/etc/passwd", "../../etc/passwd",
]
YAML_KEYS = ["1", "~", "[a]", "yes", "<<", '"\\e"', "x" * 300, "id", "type", "tests"]


def mutate_rules(rng: random.Random) -> str:
    """A real rules file with hostile YAML values (tags, aliases, huge or odd numbers, dates, control
    characters, deep nesting, bad regexes, schema refs) or keys spliced in, or lines repeated."""
    lines = rng.choice(RULES_FILES).read_text(encoding="utf-8").split("\n")
    for _ in range(rng.randint(1, 3)):
        places = [i for i, line in enumerate(lines) if re.search(r":\s+\S", line) and not line.lstrip().startswith("#")]
        r = rng.random()
        if places and r < 0.75:
            i = rng.choice(places)
            m = re.match(r"^(\s*(?:- )?[^:#]+:\s+)(.*)$", lines[i])
            if m:
                lines[i] = m.group(1) + rng.choice(YAML_VALUES)
        elif places and r < 0.9:
            i = rng.choice(places)
            m = re.match(r"^(\s*(?:- )?)([^:#]+)(:.*)$", lines[i])
            if m:
                lines[i] = m.group(1) + rng.choice(YAML_KEYS) + m.group(3)
        else:
            lines.insert(rng.randrange(len(lines)), lines[rng.randrange(len(lines))])
    return "\n".join(lines) + "\n"


def rules_problems(text: str, untrusted: bool = False) -> List[str]:
    """What is wrong with loading ``text``: [] when it gives a Config, or a ConfigError whose every
    error is a specific code with a line and a fix, no longer than a screen, printed without raw
    controls."""
    from spanassert.config import Config, ConfigError, load_config

    try:
        result = load_config(text, untrusted=untrusted)
    except ConfigError as exc:
        problems = []
        for d in exc.diagnostics:
            shown = d.format()
            if d.code == "E_INTERNAL" or not d.code.startswith(("E_", "W_")):
                problems.append(f"not a specific code: {shown[:300]}")
            if d.severity == "error" and d.line is None:
                problems.append(f"no line: {shown[:300]}")
            if d.severity == "error" and not d.hint:
                problems.append(f"no fix: {shown[:300]}")
            if len(shown) > 2000:
                problems.append(f"{len(shown)} characters: {shown[:200]}")
            if UNSAFE.search(shown.replace("\n", "")):
                problems.append(f"raw control characters: {shown[:200]!r}")
        return problems
    except BaseException as exc:  # noqa: BLE001 - the property being checked
        return ["".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-1500:]]
    return [] if isinstance(result, Config) else [f"load_config returned {type(result).__name__}"]
