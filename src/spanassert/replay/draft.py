"""Drafting a starting rules file from recorded traces: ``spanassert init --from-trace``.

The traces are read as ``replay`` reads them (every format, every convention, the same engine), and
what the agent did is summarised per episode: the tools it called, in order, with their arguments,
its steps and its token use. From that, a commented rules file:

- the allowlist of the tools seen (``trace_only_tools``);
- per-tool call caps with headroom (``trace_max_tool_calls``);
- an argument schema per tool (``trace_args_valid``): JSON types, keys present in every call as
  ``required``, small sets of observed strings as ``enum``, numeric ranges widened by half their
  width (at least 1), nested objects two levels deep;
- orderings that held in every episode (a ``sequence_valid`` test of ``before`` rules: ``A`` came
  before the first ``B`` in every episode that called ``B``), reduced transitively;
- step and token budgets with headroom (``trace_max_steps``, ``trace_max_tokens``).

Every test is written in ``mode: shadow`` unless ``enforce`` is asked for.
"""
from __future__ import annotations

import math
import re
from typing import Any, Dict, List, Sequence, Tuple

from ..assertions.base import NEED_ARGUMENTS, Assertion, BuildContext
from ..config.model import Config, TestCase
from ..config.yaml_values import safe_dump
from ..core.escaping import escape_control
from ..core.model import CONTENT_OK, MISSING, EpisodeView, ModelStep, Outcome, ToolCall
from ..otlp.json_decode import json_kind
from ..otlp.reader import read_spans
from .driver import replay_records

ENUM_MAX = 5  # a string argument with at most this many observed values (each seen twice) is an enum
MAX_CALLS_KEPT = 10_000  # calls summarised per episode
MAX_ORDERINGS = 12
SCHEMA_DEPTH = 2


class EpisodeSeen:
    __slots__ = ("calls", "steps", "tokens", "tokens_known", "decidable")

    def __init__(self) -> None:
        self.calls: List[List[Any]] = []  # [index, tool, arguments or MISSING]
        self.steps = 0
        self.tokens = 0
        self.tokens_known = True
        self.decidable = False


class _Recorder(Assertion):
    """Not a rule: the engine hands it every call and model step, and it keeps a summary."""

    type_name = "draft-recorder"
    decides_on_close = True

    def __init__(self, out: List[EpisodeSeen]) -> None:
        super().__init__("draft", 0, {}, BuildContext())
        self.tools = None
        self.needs = frozenset((NEED_ARGUMENTS,))
        self.wants_steps = True
        self.out = out

    def new_state(self) -> Tuple[EpisodeSeen, Dict[str, List[Any]]]:
        return EpisodeSeen(), {}

    def on_call_start(self, state: Any, call: ToolCall) -> None:
        seen, by_span = state
        if len(seen.calls) < MAX_CALLS_KEPT:
            entry = [call.index, call.name, MISSING]
            seen.calls.append(entry)
            by_span[call.span_id] = entry

    def on_call_end(self, state: Any, call: ToolCall) -> None:
        entry = state[1].pop(call.span_id, None)
        if entry is not None and call.arguments_state == CONTENT_OK:
            entry[2] = call.arguments

    def on_step_end(self, state: Any, step: ModelStep) -> None:
        seen = state[0]
        if step.total_tokens is None:
            seen.tokens_known = False
        else:
            seen.tokens += step.total_tokens

    def on_close(self, state: Any, episode: EpisodeView) -> Outcome:
        seen = state[0]
        seen.calls.sort(key=lambda c: c[0])
        seen.steps = episode.step_count
        seen.decidable = episode.decidable
        self.out.append(seen)
        return Outcome.passed()


def observe(paths: Sequence[str], on_issue: Any = None) -> Tuple[List[EpisodeSeen], int]:
    """The episodes in ``paths`` (every format replay reads) and the number of spans read."""
    out: List[EpisodeSeen] = []
    config = Config(tests=[TestCase(id="draft", assertions=[_Recorder(out)])])
    report = replay_records(config, read_spans(list(paths), on_issue=on_issue))
    return out, report.spans_read


# -- inference ------------------------------------------------------------------------------------
_SCHEMA_TYPES = frozenset({"null", "boolean", "string", "array", "object"})


def _json_type(v: Any) -> str:
    """The JSON Schema type of a value: its JSON kind, a number narrowed to "integer" where it is
    one that a double holds exactly, and anything else taken as a string."""
    kind = json_kind(v)
    if kind == "number":
        exact = not isinstance(v, float) or (v.is_integer() and abs(v) < 2**53)
        return "integer" if exact else "number"
    return kind if kind in _SCHEMA_TYPES else "string"


def _padded(lo: float, hi: float, integer: bool) -> Tuple[float, float]:
    pad = max((hi - lo) * 0.5, abs(hi) * 0.5, 1.0)
    low = lo - pad
    if lo >= 0:
        low = max(0.0, low)
    high = hi + pad
    if integer and math.isfinite(low) and math.isfinite(high):
        return float(math.floor(low)), float(math.ceil(high))
    return low, high


def _finite(x: Any) -> float:
    """A recorded number as a float: past the float range it is infinite, a NaN stays NaN (either
    leaves the range out: :func:`infer_schema`)."""
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def _num(x: float) -> Any:
    return int(x) if float(x).is_integer() else round(x, 6)


def infer_schema(values: List[Any], depth: int = 0) -> Dict[str, Any]:
    """A JSON Schema that every observed value satisfies, with headroom on numbers (see module doc)."""
    types = {_json_type(v) for v in values}
    if types <= {"integer", "number"} and len(types) == 2:
        types = {"number"}
    if len(types) != 1:
        return {"type": sorted(types)}
    t = next(iter(types))
    if t == "object":
        schema: Dict[str, Any] = {"type": "object"}
        if depth >= SCHEMA_DEPTH:
            return schema
        keys: List[str] = []
        for v in values:
            for k in v:
                if k not in keys:
                    keys.append(k)
        if keys:
            schema["properties"] = {k: infer_schema([v[k] for v in values if k in v], depth + 1) for k in keys}
            required = [k for k in keys if all(k in v for v in values)]
            if required:
                schema["required"] = required
        return schema
    if t == "string":
        distinct = sorted(set(values))
        if len(distinct) <= ENUM_MAX and len(values) >= 2 * len(distinct):
            return {"type": "string", "enum": distinct}
        return {"type": "string"}
    if t in ("integer", "number"):
        lo, hi = _finite(min(values)), _finite(max(values))
        if math.isfinite(lo) and math.isfinite(hi):
            lo, hi = _padded(lo, hi, t == "integer")
        if not (math.isfinite(lo) and math.isfinite(hi)):
            # A NaN, an infinity or a number past the float range was recorded (JSON text from spans:
            # anything), or the headroom passes it: no range holds every value. (A NaN bound would
            # be a check that never fails.)
            return {"type": t}
        return {"type": t, "minimum": _num(lo), "maximum": _num(hi)}
    if t == "array":
        items = [x for v in values for x in v]
        schema = {"type": "array"}
        if items and depth < SCHEMA_DEPTH:
            schema["items"] = infer_schema(items, depth + 1)
        return schema
    return {"type": t}


def headroom(n: int) -> int:
    """A bound above the largest observed count: half again, at least 2 more (in integers: a token
    count from a span can be past the float range)."""
    return max(n + 2, n + (n + 1) // 2)


def orderings(episodes: List[EpisodeSeen]) -> List[Tuple[str, str, int]]:
    """(A, B, episodes) for every pair where A came before the first B in every episode calling B;
    pairs implied by two others are left out."""
    firsts: List[Dict[str, int]] = []
    for ep in episodes:
        first: Dict[str, int] = {}
        for pos, (_, tool, _) in enumerate(ep.calls):
            first.setdefault(tool, pos)
        firsts.append(first)
    tools = sorted({t for f in firsts for t in f})
    held: Dict[Tuple[str, str], int] = {}
    for a in tools:
        for b in tools:
            if a == b:
                continue
            with_b = [f for f in firsts if b in f]
            if with_b and all(a in f and f[a] < f[b] for f in with_b):
                held[(a, b)] = len(with_b)
    reduced = [(a, b, n) for (a, b), n in held.items()
               if not any((a, c) in held and (c, b) in held for c in tools if c not in (a, b))]
    reduced.sort(key=lambda x: (-x[2], x[0], x[1]))
    return reduced[:MAX_ORDERINGS]


def _slug(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-")
    return s[:60] or "tool"


# -- writing --------------------------------------------------------------------------------------
def draft(episodes: List[EpisodeSeen], sources: Sequence[str], *, enforce: bool = False) -> str:
    """The commented rules file for ``episodes`` (drafted from ``sources``)."""
    calls_by_tool: Dict[str, List[int]] = {}
    args_by_tool: Dict[str, List[Any]] = {}
    unrecorded: Dict[str, int] = {}
    for ep in episodes:
        counts: Dict[str, int] = {}
        for _, tool, args in ep.calls:
            counts[tool] = counts.get(tool, 0) + 1
            if args is MISSING:
                unrecorded[tool] = unrecorded.get(tool, 0) + 1
            else:
                args_by_tool.setdefault(tool, []).append(args)
        for tool in counts:
            calls_by_tool.setdefault(tool, [])
        for tool in calls_by_tool:
            calls_by_tool[tool].append(counts.get(tool, 0))
    tools = sorted(calls_by_tool)
    mode = {} if enforce else {"mode": "shadow"}
    blocks: List[Tuple[List[str], Dict[str, Any]]] = []

    if tools:
        blocks.append(([f"Allowlist: the {len(tools)} tool(s) seen. A call of any other tool fails when it starts."],
                       {"id": "only-observed-tools", **mode,
                        "assertions": [{"type": "trace_only_tools", "tools": tools}]}))
        caps = []
        notes = []
        for tool in tools:
            most = max(calls_by_tool[tool])
            caps.append({"type": "trace_max_tool_calls", "tool": tool, "max": headroom(most)})
            notes.append(f"{tool}: at most {most}")
        blocks.append((["Call caps per episode, with headroom over the most seen (" + "; ".join(notes)[:400] + ")."],
                       {"id": "call-caps", **mode, "assertions": caps}))
    ids: Dict[str, int] = {}
    for tool in tools:
        values = args_by_tool.get(tool)
        if not values:
            continue
        test_id = f"args-{_slug(tool)}"
        ids[test_id] = ids.get(test_id, 0) + 1
        if ids[test_id] > 1:  # two names with one slug (`{x}` and `- x`): ids must be unique
            test_id += f"-{ids[test_id]}"
        schema = infer_schema(values)
        note = f"Arguments of `{tool}` as seen in {len(values)} call(s): types, keys always present, "\
               "small value sets, number ranges widened by half."
        if unrecorded.get(tool):
            note += f" {unrecorded[tool]} call(s) had no recorded arguments."
        blocks.append(([note], {"id": test_id, **mode,
                                "assertions": [{"type": "trace_args_valid", "tool": tool, "schema": schema}]}))
    pairs = orderings(episodes)
    if pairs:
        rules = [{"type": "before", "first": a, "then": b} for a, b, _ in pairs]
        notes = [f"{a} before {b} ({n} episode(s))" for a, b, n in pairs]
        blocks.append((["Orderings that held in every episode: " + "; ".join(notes)[:600] + ".",
                        "A rule whose later tool is never called checks nothing (not_applicable)."],
                       {"id": "observed-order", **mode, "expected": {"type": "sequence_valid", "rules": rules}}))
    budget: List[Dict[str, Any]] = []
    notes = []
    if episodes:
        most_steps = max(ep.steps for ep in episodes)
        if most_steps:
            budget.append({"type": "trace_max_steps", "max": headroom(most_steps)})
            notes.append(f"at most {most_steps} steps")
        most_tokens = max(ep.tokens for ep in episodes)
        if not math.isfinite(_finite(headroom(most_tokens))):
            notes.append("a token count past any budget was recorded, so no token budget is drafted")
        elif all(ep.tokens_known for ep in episodes) and any(ep.tokens for ep in episodes):
            budget.append({"type": "trace_max_tokens", "max": headroom(most_tokens), "kind": "total"})
            notes.append(f"at most {most_tokens} tokens")
        elif any(not ep.tokens_known for ep in episodes):
            notes.append("token usage was not recorded on every model step, so no token budget is drafted")
    if budget:
        blocks.append(([f"Budgets per episode with headroom (seen: {'; '.join(notes)})."],
                       {"id": "budgets", **mode, "assertions": budget}))

    lines = [
        f"# Drafted by `spanassert init --from-trace` from {len(episodes)} episode(s) in:",
        *[f"#   {escape_control(s)}" for s in sources[:20]],
        *([f"#   ... and {len(sources) - 20} more"] if len(sources) > 20 else []),
        "# Every bound below is what these traces did, with some headroom: review each test before",
        "# relying on it. " + ("The tests are enforced." if enforce else
                               "Every test runs in `mode: shadow`: its failures are reported, nothing is "
                               "enforced.\n# Delete a test's `mode: shadow` line (or re-run with --enforce) "
                               "to enforce it."),
        "# Check the file with: spanassert validate FILE; try it with: spanassert replay FILE TRACES...",
        "version: 1",
        "tests:" if blocks else "tests: []",
    ]
    for comments, test in blocks:
        lines.append("")
        # Tool names come from spans: a line break in one would end its comment and write what follows
        # as YAML (a test of the trace's choosing); the one escaping rule for span text keeps it on the line.
        lines.extend(f"  # {escape_control(c)}" for c in comments)
        dumped = safe_dump([test], sort_keys=False, allow_unicode=True, width=100, default_flow_style=None)
        if escape_control(dumped.replace("\n", "")) != dumped.replace("\n", ""):
            # PyYAML writes bidi controls (U+202E, which reorders how the line is shown) and some C1
            # characters raw when it may write Unicode; this test names such a tool or key, so it is
            # written ASCII-only: each of those is then a "\u202E" escape, the value the same.
            dumped = safe_dump([test], sort_keys=False, allow_unicode=False, width=100,
                                    default_flow_style=None)
        lines.extend("  " + line for line in dumped.rstrip("\n").split("\n"))
    return "\n".join(lines) + "\n"


EXAMPLE = """\
# A starting rules file for spanassert. Check it with:  spanassert validate rules.yaml
# Run it on recorded traces:  spanassert replay rules.yaml traces.jsonl
# Draft one from what your agent already does:  spanassert init --from-trace traces.jsonl -o rules.yaml
version: 1
tests:
  # Safety: fails when the span of this tool starts, before the tool body runs.
  - id: never-delete-customers
    severity: critical
    assertions:
      - type: trace_must_not_call_tool
        tool: delete_customer

  # Deny by default: only these tools may be called.
  - id: only-support-tools
    assertions:
      - type: trace_only_tools
        tools: [lookup_order, get_refund_policy, issue_refund, send_email]

  # Arguments: refunds stay within the limit (the message names the bound, never the value).
  - id: refund-within-limit
    assertions:
      - type: trace_args_valid
        tool: issue_refund
        schema:
          type: object
          properties:
            amount: { type: number, exclusiveMinimum: 0, maximum: 500 }
          required: [amount]

  # Loops and budgets: the same call at most twice; at most 20 steps per episode.
  - id: no-loops
    assertions:
      - type: trace_no_repeat
        max: 2
      - type: trace_max_steps
        max: 20

  # A new rule runs in shadow mode first: reported, never enforced.
  - id: no-secrets-in-arguments
    mode: shadow
    assertions:
      - type: trace_no_sensitive_data
        detectors: [secrets, credit_card]
"""

__all__ = ["EpisodeSeen", "observe", "draft", "infer_schema", "orderings", "headroom", "EXAMPLE"]
