"""The shape every assertion type shares: the declared contract the engine reads.

An assertion type is one class in one module of this package:

- ``type_name``: the YAML ``type:`` value.
- ``fields``: the keys it accepts (beyond ``type`` and the common keys), each a :class:`Field`
  with a JSON-Schema fragment. The loader rejects any other key (with a did-you-mean), checks each
  value against its fragment, and builds ``spanassert schema`` from the same declarations.
- ``__init__(test_id, index, values, ctx)``: ``values`` holds every declared field (defaults
  filled in), already type-checked. Semantic problems go to ``ctx.error(...)``; regexes and JSON
  Schemas compile through ``ctx`` so that bad ones are reported with their position.
- ``ineffective_reason()``: a sentence when the assertion cannot fail (then it is refused with
  ``E_ASSERT_INEFFECTIVE`` unless ``--allow-ineffective-assertions``).
- Live evaluation, per episode: ``new_state()`` then ``on_call_start`` / ``on_call_end`` /
  ``on_step`` / ``on_step_end`` (a model step's usage) / ``on_time`` (a span's end time)
  (each may return a :class:`Failure` at the offending call or span: safety rules fail early),
  and ``on_close`` for the final :class:`Outcome` (liveness rules decide here). State is O(1) or
  O(rule size): never re-scan the episode.
- Unit-test forms (``scope = "unit"``) need no episode: ``evaluate_unit()`` at load.

The engine never special-cases a type: it reads only these attributes and methods. A type is
made known by ``register(cls)`` after its class (``register_expected`` for an ``expected:`` form),
in :mod:`.registry`; both also work as class decorators.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import re
from typing import Any, ClassVar, Dict, Final, FrozenSet, List, Mapping, Optional, Pattern, Tuple

from ..core.model import MISSING, EpisodeView, Failure, ModelStep, Outcome, ToolCall, Verdict
from ..core.native import mypyc_attr
from .regex_risk import W_CFG_REGEX_BACKTRACKING, backtracking_risk

# What an assertion may need from a call or an episode. When a rule needs data the instrumentation
# did not record, it is inconclusive, never passed.
NEED_ARGUMENTS: Final = "arguments"
NEED_RESULT: Final = "result"
NEED_STATUS: Final = "status"
NEED_DURATION: Final = "duration"
NEED_STEPS: Final = "steps"
NEED_FINAL_OUTPUT: Final = "final_output"

EVIDENCE_NONE: Final = "none"
EVIDENCE_ARGUMENTS: Final = "arguments"
EVIDENCE_RESULT: Final = "result"
EVIDENCE_ALL: Final = "all"

EVIDENCE_MAX_CHARS: Final = 120


class Field:
    """One accepted key of an assertion: its JSON-Schema fragment, whether it is required, its
    default, and one line of documentation (used by ``spanassert schema`` and the README)."""

    __slots__ = ("schema", "required", "default", "doc")

    def __init__(
        self,
        schema: Mapping[str, Any],
        *,
        required: bool = False,
        default: Any = MISSING,
        doc: str = "",
    ) -> None:
        self.schema = dict(schema)
        self.required = required
        self.default = default
        self.doc = doc


# Keys every assertion accepts in addition to its own fields.
COMMON_FIELDS: Final[Dict[str, Field]] = {
    "id": Field({"type": "string", "minLength": 1}, doc="A name for this assertion in reports."),
    "evidence": Field(
        {"enum": [EVIDENCE_NONE, EVIDENCE_ARGUMENTS, EVIDENCE_RESULT, EVIDENCE_ALL]},
        default=EVIDENCE_NONE,
        doc="Which recorded values may appear (truncated) in violation messages. Default: none.",
    ),
}


E_CFG_SCHEMA_REF: Final = "E_CFG_SCHEMA_REF"
# Keywords of drafts 2019-09 / 2020-12 that Draft 7 does not know.
_MODERN_KEYWORDS: Final = frozenset({
    "$defs", "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor", "$vocabulary",
    "prefixItems", "dependentRequired", "dependentSchemas", "unevaluatedProperties", "unevaluatedItems",
    "minContains", "maxContains", "contentSchema",
})


def _uses_modern_keywords(node: Any, depth: int = 0) -> bool:
    if depth > 64:
        return True  # let the full meta-schema judge deep nesting
    if isinstance(node, dict):
        if not _MODERN_KEYWORDS.isdisjoint(node.keys()):
            return True
        return any(_uses_modern_keywords(v, depth + 1) for v in node.values())
    if isinstance(node, list):
        return any(_uses_modern_keywords(v, depth + 1) for v in node)
    return False


def _draft7_meta() -> Any:
    import jsonschema

    return jsonschema.Draft7Validator


@mypyc_attr(allow_interpreted_subclasses=True)  # subclassed by code that is not compiled (see core.native)
class BuildContext:
    """What the loader gives an assertion while it is built. The loader subclasses this and turns
    ``error``/``warn`` into positioned diagnostics; this base is enough for tests."""

    def __init__(self, *, evidence_key: Optional[bytes] = None, base_dir: Optional[str] = None) -> None:
        self.errors: List[Any] = []
        self.warnings: List[Any] = []
        self.evidence_key = evidence_key
        self.base_dir = base_dir
        self.settings: Dict[str, Any] = {}
        # An untrusted rules file (see config.load_config): nothing outside its folder is read.
        self.untrusted = False

    def error(self, code: str, message: str, *, field: Optional[str] = None, hint: Optional[str] = None,
              at_key: bool = False) -> None:
        """``at_key``: point at the key named by ``field`` rather than at its value."""
        self.errors.append((code, message, field, hint))

    def warn(self, code: str, message: str, *, field: Optional[str] = None, hint: Optional[str] = None) -> None:
        self.warnings.append((code, message, field, hint))

    def compile_regex(self, pattern: str, *, field: str, flags: int = 0) -> Optional[Pattern[str]]:
        try:
            compiled = re.compile(pattern, flags)
        except (re.error, TypeError) as exc:
            self.error("E_CFG_REGEX", f"invalid regex {pattern!r}: {exc}", field=field,
                       hint="fix the regular expression (Python `re` syntax); write it in single quotes so YAML "
                            "keeps its backslashes")
            return None
        self.warn_regex_risk(pattern, field=field, flags=flags)
        return compiled

    def warn_regex_risk(self, pattern: str, *, field: str, flags: int = 0) -> None:
        """Warn (W_CFG_REGEX_BACKTRACKING) about a regex that may backtrack exponentially."""
        risk = backtracking_risk(pattern, flags)
        if risk is not None:
            self.warn(
                W_CFG_REGEX_BACKTRACKING,
                f"regex {pattern!r} can take exponential time on some inputs ({risk}); a crafted "
                "argument of a few dozen characters can stall the agent while it is matched",
                field=field,
                hint="remove the nesting, e.g. `(a+)+` -> `a+`, `(.*)*` -> `.*`, `(a|a)*` -> `a*`",
            )

    def compile_schema(self, schema: Any, *, field: str) -> Optional[Any]:
        """Returns a jsonschema validator, or None (after reporting) when the schema is invalid.

        References (``$ref``) resolve only within the schema itself: one that points elsewhere (a
        URL, a file) or to nothing is reported here, at its position, and the validator is built
        over a registry that never retrieves anything. A schema of plain keywords is checked
        without ``jsonschema`` and its validator built on first use (:mod:`.schema_meta`)."""
        from .schema_util import SCHEMAS, local_registry, ref_problems, schema_key

        key = schema_key(schema)
        if key is None or '"$ref"' in key or '"$dynamicRef"' in key or '"$recursiveRef"' in key:
            problems = ref_problems(schema)
            if problems:
                for where, message in problems:
                    below = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in where)
                    self.error(E_CFG_SCHEMA_REF, f"invalid JSON Schema: {message}", field=field + below,
                               hint="put the referenced schema under `$defs` in the same schema and point at it "
                                    "with `$ref: '#/$defs/NAME'`")
                return None
        cached = SCHEMAS.get(("checked", key)) if key is not None else None
        if cached is not None:
            return cached
        from .schema_hints import misspelt_keywords

        misspelt = misspelt_keywords(schema)
        for path, wrong, right in misspelt:
            self.error("E_CFG_SCHEMA", f"unknown JSON Schema keyword `{wrong}`; did you mean `{right}`? "
                       "(JSON Schema ignores unknown keywords, so this check would never run)",
                       field=_field_below(field, path), hint=f"rename `{wrong}` to `{right}`", at_key=True)
        if misspelt:
            return None
        if key is None or "NaN" in key:
            nan_at = _nan_path(schema)
            if nan_at is not None:
                # `maximum: .nan`: no number compares to a NaN, so the bound never fails a value (a
                # check that looks written and never runs).
                self.error("E_CFG_SCHEMA", "invalid JSON Schema: a NaN number (`.nan`) compares with no value: a "
                           "bound of NaN never fails a value, a constant of NaN never matches one",
                           field=_field_below(field, nan_at), hint="write the number the check should use")
                return None
        from .schema_meta import LazyValidator, surely_valid

        if surely_valid(schema):
            lazy = LazyValidator(schema)
            if key is not None:
                SCHEMAS.put(("checked", key), lazy)
            return lazy
        import jsonschema

        try:
            cls = jsonschema.validators.validator_for(schema)
            if isinstance(schema, dict) and "$schema" not in schema and not _uses_modern_keywords(schema):
                # The 2020-12 meta-schema resolves dynamic references and is five times slower to
                # check against than Draft 7's; for a schema that uses only keywords the two drafts
                # share, both meta-schemas impose the same structure.
                _draft7_meta().check_schema(schema)
            else:
                cls.check_schema(schema)
            validator = cls(schema, format_checker=cls.FORMAT_CHECKER, registry=local_registry())
            if key is not None:
                # Checking a schema against its meta-schema is most of the cost of loading a rules
                # file; identical schemas (common across tests) are checked once. Validators are
                # immutable, so sharing one is safe.
                SCHEMAS.put(("checked", key), validator)
            return validator
        except jsonschema.exceptions.SchemaError as exc:
            from .schema_hints import explain_schema_error, schema_error_hint

            where, message = explain_schema_error(exc)
            self.error("E_CFG_SCHEMA", f"invalid JSON Schema: {message}", field=_field_below(field, where),
                       hint=schema_error_hint(exc))
            return None
        except Exception as exc:  # noqa: BLE001 - any bad schema is a config error, never a crash
            self.error("E_CFG_SCHEMA", f"invalid JSON Schema: {exc}", field=field)
            return None


def _nan_path(schema: Any) -> Optional[List[Any]]:
    """The key path of the first NaN number in ``schema``, or None (bounded: a schema nested past
    the bound is left to the rest of the checks)."""
    stack: List[Tuple[List[Any], Any]] = [([], schema)]
    seen = 0
    while stack and seen < 100_000:
        path, node = stack.pop()
        seen += 1
        if type(node) is float and node != node:
            return path
        if isinstance(node, dict):
            stack.extend(([*path, k], v) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend(([*path, i], v) for i, v in enumerate(node))
    return None


def _field_below(field: str, path: Any) -> str:
    """``field`` extended by a key path inside its value, as far as the dotted form can say it
    (a key with a dot or bracket, or that looks like an index, ends it)."""
    out = field
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and part and not part.isdigit() and not any(c in part for c in ".[]"):
            out += f".{part}"
        else:
            break
    return out


@mypyc_attr(allow_interpreted_subclasses=True)  # subclassed by code that is not compiled (see core.native)
class Assertion:
    """Base class of every assertion type (see the module docstring).

    The contract is declared here once: every attribute the engine, the loader or a front door
    reads from an assertion is a typed attribute of this class with its default, so a type states
    only where it differs. :data:`CAPABILITIES` lists the ones the engine reads to plan an episode;
    tests/test_assertions_declared.py fails when the engine reads anything not declared here.
    """

    # -- what the type is (loader, `spanassert schema`, docs) -----------------------------------
    type_name: ClassVar[str] = ""
    fields: ClassVar[Dict[str, Field]] = {}
    doc: ClassVar[str] = ""
    # "trace": evaluated over episodes; "unit": evaluated once at load from supplied test data.
    scope: ClassVar[str] = "trace"
    # False for names accepted for compatibility but refused at load (E_CFG_NOT_EXECUTABLE).
    executable: ClassVar[bool] = True

    # -- capabilities the engine reads (a type sets what differs: the ClassVar ones in its class
    # body, the others in its __init__, never in its class body: a compiled engine reads them from
    # the instance, where a class-body value of a class that is not compiled is not seen) -------
    # True for liveness rules, decided when the episode closes (must_call, sequences, ...).
    decides_on_close: ClassVar[bool] = False
    # True when a failure at a call depends on that call alone: serve checks such rules on each
    # tool span as it arrives, before the trace is assembled (Engine.precheck). Per instance where
    # the rule's values decide it (trace_no_sensitive_data: not when it scans the final output).
    order_free: bool = False
    # True when a pass on the calls seen stays a pass whatever calls were not seen: more calls,
    # anywhere in the episode, cannot break it (at least N calls of a tool; an ordered subsequence).
    # In an episode whose evidence is incomplete (root not seen, spans dropped) only such a pass
    # stands; every other pass becomes inconclusive (`every trigger is followed by ...`, `the last
    # call is ...`, `among the first N calls` can all be broken by a call that was not seen).
    pass_survives_unseen_calls: bool = False
    # True when a pass depends on the order of the calls (sequences, trajectories, the last call,
    # cycles): in an episode where two calls started at the same instant (their order unknown) such
    # a pass is inconclusive.
    order_matters: ClassVar[bool] = False
    # Which calls this assertion reacts to: a set of tool names, or None for every call; and the
    # calls whose whole name matches ``tool_pattern`` (the `tool_pattern:` field), if any.
    tools: Optional[FrozenSet[str]] = None
    tool_pattern: Optional[Pattern[str]] = None
    # What it needs recorded (NEED_*); the engine decodes nothing a rule does not need.
    needs: FrozenSet[str] = frozenset()
    # Whether it reacts to model steps (trace_max_steps).
    wants_steps: bool = False
    # Whether its ``on_call_start`` can fail on a call's tool name alone (a forbidden tool). For the
    # record and the docs only: the live processor evaluates every call's start before the tool
    # runs, in both modes, so nothing plans on it.
    reports_at_start: bool = False
    # True when ``on_close`` of a fresh state (``new_state()``: no call, step or span time reached
    # the rule) reads nothing of the episode but ``decidable``, ``incomplete`` and ``close_reason``,
    # and changes nothing (neither the state nor the episode). The engine then decides such an
    # untouched rule once per plan and close reason, for episodes with nothing incomplete, and
    # gives that outcome to every such episode (a rule most episodes never reach costs its close
    # once). Per instance where the rule's values decide it (trace_no_sensitive_data: not when it
    # scans the final output).
    untouched_close_shared: bool = False
    # For a rule that overrides ``on_time``: a span time (nanoseconds from the episode's earliest
    # start) up to which ``on_time`` returns None and changes nothing, whatever the state; the
    # engine then does not call it for span ends within it. None: no such bound (always called).
    time_quiet_ns: Optional[float] = None

    CAPABILITIES: ClassVar[Tuple[str, ...]] = (
        "decides_on_close", "order_free", "pass_survives_unseen_calls", "order_matters",
        "tools", "tool_pattern", "needs", "wants_steps", "reports_at_start", "untouched_close_shared",
        "time_quiet_ns",
    )

    # -- identity, set by __init__ ----------------------------------------------------------------
    test_id: str
    index: int
    name: Optional[str]  # the rule's `id`
    evidence: str
    # Where the loader found it (set after building): `expected` or `assertions`, and its (line,
    # column) in the rules file, which diagnostics and near-miss reports point at.
    origin: str = "assertions"
    position: Optional[Tuple[Optional[int], Optional[int]]] = None

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        self.test_id = test_id
        self.index = index
        self.name = values.get("id")
        self.evidence = values.get("evidence") or EVIDENCE_NONE
        self._evidence_key = ctx.evidence_key

    def select_calls(self, selector: Any) -> None:
        """React to the calls a :class:`~.selectors.CallSelector` names (or, with no selector, to
        every call): sets ``tools`` and ``tool_pattern``, which the engine dispatches on."""
        if selector is None:
            self.tools, self.tool_pattern = None, None
        elif selector.pattern is None:
            self.tools, self.tool_pattern = frozenset((selector.tool,)), None
        else:
            self.tools, self.tool_pattern = frozenset(), selector.pattern

    def applies_to(self, name: str) -> bool:
        """Whether a call named ``name`` reaches this assertion (``tools`` and ``tool_pattern``)."""
        if self.tools is None or name in self.tools:
            return True
        return self.tool_pattern is not None and self.tool_pattern.fullmatch(name) is not None

    def named_tools(self) -> FrozenSet[str]:
        """The exact tool names this assertion's rules name (for near-miss reports)."""
        return self.tools or frozenset()

    # -- evaluation (override what applies) ----------------------------------------------------
    def ineffective_reason(self) -> Optional[str]:
        return None

    def new_state(self) -> Any:
        return None

    def on_call_start(self, state: Any, call: ToolCall) -> Optional[Failure]:
        return None

    def on_call_end(self, state: Any, call: ToolCall) -> Optional[Failure]:
        return None

    def blocks_again(self, state: Any, call: ToolCall) -> Optional[str]:
        """For a guard, after this rule failed earlier in the episode: why ``call``, which has just
        started, breaks it again (a count already over its cap, a budget spent, a call forbidden
        after its trigger), or None. Rules that fail at every offending call report it themselves
        and keep the default. Called after ``on_call_start``; must not change what the rule decides."""
        return None

    def on_step(self, state: Any, episode: EpisodeView) -> Optional[Failure]:
        return None

    def on_step_end(self, state: Any, step: ModelStep) -> Optional[Failure]:
        """A model step ended (only for rules with ``wants_steps``): its usage and model, each None
        when not recorded. The engine calls it only for rules that override it."""
        return None

    def on_time(self, state: Any, ns: int, episode: EpisodeView) -> Optional[Failure]:
        """A span of the episode (agent, model step or tool call) ended at ``ns`` (span timestamps,
        never the wall clock); ``episode.start_ns``/``end_ns`` hold the span time so far (starts
        included). The engine calls it only for rules that override it."""
        return None

    def on_close(self, state: Any, episode: EpisodeView) -> Outcome:
        return Outcome.passed()

    def evaluate_unit(self) -> Outcome:
        """Unit-test forms: PASSED when the supplied data met ``expect``, FAILED otherwise."""
        raise NotImplementedError

    # -- helpers for messages ------------------------------------------------------------------
    @property
    def label(self) -> str:
        return self.name or f"{self.test_id}#{self.index}"

    def show(self, value: Any, kind: str = EVIDENCE_ARGUMENTS) -> str:
        """Render a recorded value for a message: the value itself (truncated) only when this rule
        opted in to that evidence; otherwise a keyed hash when a key is configured, else
        ``<redacted>``."""
        allowed = self.evidence == EVIDENCE_ALL or self.evidence == kind
        if allowed:
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
            text = repr(text) if isinstance(value, str) else text
            if len(text) > EVIDENCE_MAX_CHARS:
                text = text[: EVIDENCE_MAX_CHARS - 1] + "…"
            return text
        if self._evidence_key:
            raw = json.dumps(value, sort_keys=True, default=str).encode("utf-8", "replace")
            return "hmac:" + hmac.new(self._evidence_key, raw, hashlib.sha256).hexdigest()[:16]
        return "<redacted>"

    def evidence_note(self, value: Any, kind: str = EVIDENCE_ARGUMENTS) -> str:
        """``; arguments: …`` for a message: the value (or its keyed hash) when this rule may show
        that evidence (it opted in, or a key lets a hash stand in, so alerts group without
        leaking); nothing otherwise."""
        if self.evidence == EVIDENCE_ALL or self.evidence == kind or self._evidence_key:
            return f"; {kind}: {self.show(value, kind)}"
        return ""


def call_ref(call: ToolCall) -> str:
    """How a message names a call: its 1-based position in the episode and its span."""
    return f"call #{call.index + 1}" + (f" (span {call.span_id})" if call.span_id else "")


__all__ = [
    "Assertion",
    "BuildContext",
    "Field",
    "call_ref",
    "COMMON_FIELDS",
    "W_CFG_REGEX_BACKTRACKING",
    "backtracking_risk",
    "NEED_ARGUMENTS",
    "NEED_RESULT",
    "NEED_STATUS",
    "NEED_DURATION",
    "NEED_STEPS",
    "NEED_FINAL_OUTPUT",
    "EVIDENCE_NONE",
    "EVIDENCE_ARGUMENTS",
    "EVIDENCE_RESULT",
    "EVIDENCE_ALL",
    "Outcome",
    "Failure",
    "ToolCall",
    "EpisodeView",
    "Verdict",
    "MISSING",
]
