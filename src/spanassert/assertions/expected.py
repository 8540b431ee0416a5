"""``expected:`` checks: Assay's output checks and its metric forms over recorded tool calls.

Output checks (``must_contain`` … ``semantic_similarity_to``) read the episode's final output text
and decide when the episode closes; when the output was not recorded, or the episode was cut short,
they are inconclusive, never passed. The metric forms (``args_valid``, ``sequence_valid``,
``tool_blocklist``, ``tool_output_valid``) read the episode's recorded calls incrementally, failing
at the offending call. Assay types that need an LLM judge or tool-definition snapshots are declared
so that using one gets a specific refusal instead of an unknown-type error.

A check that cannot fail (``must_contain: []``, an empty pattern, ``rules: []`` alone, …) is a load
error; one that no response could pass (``must_not_contain: [""]``) is one too.
"""
from __future__ import annotations

import collections
import importlib
import json
import math
import os
import re
from typing import Any, Callable, Deque, Dict, FrozenSet, List, Mapping, Optional, Pattern, Sequence, Tuple

from ..core.model import CONTENT_MISSING, CONTENT_OK, MISSING, EpisodeView, Failure, Outcome, ToolCall
from .base import (  # call_ref is re-exported
    EVIDENCE_ARGUMENTS,
    EVIDENCE_RESULT,
    NEED_ARGUMENTS,
    NEED_FINAL_OUTPUT,
    NEED_RESULT,
    Assertion,
    BuildContext,
    Field,
    call_ref,
    register_expected,
)
from .call_checks import EveryCallState, every_call_outcome
from .rules import (
    HELD,
    INCONCLUSIVE,
    NOT_EXERCISED,
    RULE_ITEM_SCHEMA,
    VIOLATED,
    Rule,
    RuleEvaluation,
    RuleState,
    parse_rules,
)
from .schema_util import schema_is_vacuous, schema_names_arguments, validation_messages
from .selectors import warn_tool_name

E_CFG_VACUOUS = "E_CFG_VACUOUS"
E_CFG_UNSATISFIABLE = "E_CFG_UNSATISFIABLE"
E_CFG_POLICY = "E_CFG_POLICY"
E_CFG_EMBEDDER = "E_CFG_EMBEDDER"
E_CFG_UNTRUSTED = "E_CFG_UNTRUSTED"
E_CFG_NOT_EXECUTABLE = "E_CFG_NOT_EXECUTABLE"
E_CFG_CONFLICT = "E_CFG_CONFLICT"
W_CFG_NO_EFFECT = "W_CFG_NO_EFFECT"

DEFAULT_MIN_SCORE = 0.80
DEFAULT_REGEX_CHARS = 100_000

REGEX_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}

SCHEMA_VALUE = {"type": ["object", "boolean"]}
TOOL_SCHEMA_MAP = {"type": "object", "additionalProperties": SCHEMA_VALUE}

# Root JSON-Schema keywords: a "tool name" spelled like one means a bare schema was given where a
# map {tool: schema} was expected.
_SCHEMA_KEYWORDS = frozenset({
    "$schema", "$id", "$ref", "$defs", "definitions", "type", "properties", "required", "items",
    "additionalProperties", "patternProperties", "allOf", "anyOf", "oneOf", "not", "enum", "const",
    "minimum", "maximum", "minLength", "maxLength", "pattern", "format", "title", "description",
})




def given(values: Mapping[str, Any], key: str) -> bool:
    v = values.get(key, MISSING)
    return v is not MISSING and v is not None


def evidence_suffix(a: Assertion, value: Any, kind: str) -> str:
    """`` (arguments …)`` when this rule may show the value (or its keyed hash); else nothing."""
    shown = a.show(value, kind)
    return "" if shown == "<redacted>" else f" ({kind}: {shown})"


def load_policy_file(path: str, ctx: BuildContext, field: str) -> Any:
    """Read a YAML or JSON policy file (relative to the rules file). Reports and returns MISSING on error.

    For an untrusted rules file, only a file inside the rules file's folder is read: an absolute
    path, a path through ``..``, or a symbolic link leading out is refused (``E_CFG_UNTRUSTED``)."""
    import yaml

    full = path if os.path.isabs(path) or not ctx.base_dir else os.path.join(ctx.base_dir, path)
    if ctx.untrusted:
        folder = os.path.realpath(ctx.base_dir or os.getcwd())
        try:
            inside = not os.path.isabs(path) and os.path.commonpath([folder, os.path.realpath(full)]) == folder
        except ValueError:  # another drive
            inside = False
        if not inside:
            ctx.error(E_CFG_UNTRUSTED, f"policy file {path!r} is outside the rules file's folder, which an untrusted "
                      "rules file may not read", field=field,
                      hint="keep policy files next to the rules file (a relative path without `..`), or load "
                           "the file as trusted only if you trust its author (see SECURITY.md)")
            return MISSING
    try:
        with open(full, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        ctx.error(E_CFG_POLICY, f"cannot read policy file {path!r}: {exc.strerror or exc}", field=field,
                  hint="paths are relative to the rules file")
        return MISSING
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        ctx.error(E_CFG_POLICY, f"policy file {path!r} is not valid YAML/JSON{where}: {getattr(exc, 'problem', exc)}",
                  field=field)
        return MISSING


class _OutputCheck(Assertion):
    """Base of the checks on the final output text."""

    decides_on_close = True

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.tools = frozenset()  # reads no calls
        self.needs = frozenset({NEED_FINAL_OUTPUT})

    def on_close(self, state: Any, episode: EpisodeView) -> Outcome:
        text = episode.final_output
        if text is None:
            return Outcome.inconclusive("the episode's final output was not recorded")
        if not episode.decidable:
            reason = episode.close_reason.value if episode.close_reason is not None else "unknown"
            return Outcome.inconclusive(f"the episode did not complete (closed by {reason}), so its final output is not final")
        return self.check_text(text)

    def check_text(self, text: str) -> Outcome:
        raise NotImplementedError


def _string_list(values: Mapping[str, Any], key: str) -> List[str]:
    v = values.get(key)
    if isinstance(v, str):  # legacy scalar form
        return [v]
    return list(v) if isinstance(v, list) else []


@register_expected
class MustContain(_OutputCheck):
    type_name = "must_contain"
    doc = "The final output must contain every listed substring (case-sensitive)."
    fields = {
        "must_contain": Field({"type": ["array", "string"], "items": {"type": "string"}}, required=True,
                              doc="Substrings that must all appear in the final output."),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.needles = _string_list(values, "must_contain")
        if not self.needles:
            ctx.error(E_CFG_VACUOUS,
                      "`must_contain` is empty: with nothing to look for, this test would pass for any response",
                      field="must_contain",
                      hint="list at least one substring, or drop `expected:` and keep the test's checks in `assertions:`")
        for i, s in enumerate(self.needles):
            if s == "":
                ctx.error(E_CFG_VACUOUS,
                          f"`must_contain` entry #{i} is the empty string, which every response contains, so it checks nothing",
                          field=f"must_contain[{i}]", hint="remove the empty entry")

    def check_text(self, text: str) -> Outcome:
        absent = [s for s in self.needles if s not in text]
        if not absent:
            return Outcome.passed(f"final output contains all {len(self.needles)} required substring(s)")
        more = f" (and {len(absent) - 1} more)" if len(absent) > 1 else ""
        return Outcome.failed(f"final output does not contain {absent[0]!r}{more}")


@register_expected
class MustNotContain(_OutputCheck):
    type_name = "must_not_contain"
    doc = "The final output must contain none of the listed substrings (case-sensitive)."
    fields = {
        "must_not_contain": Field({"type": ["array", "string"], "items": {"type": "string"}}, required=True,
                                  doc="Substrings that must not appear in the final output."),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.needles = _string_list(values, "must_not_contain")
        if not self.needles:
            ctx.error(E_CFG_VACUOUS,
                      "`must_not_contain` is empty: with nothing forbidden, this test would pass for any response",
                      field="must_not_contain", hint="list at least one forbidden substring")
        for i, s in enumerate(self.needles):
            if s == "":
                ctx.error(E_CFG_UNSATISFIABLE,
                          f"`must_not_contain` entry #{i} is the empty string: every response contains it, so no response could pass",
                          field=f"must_not_contain[{i}]", hint="remove the empty entry")

    def check_text(self, text: str) -> Outcome:
        for s in self.needles:
            at = text.find(s)
            if at >= 0:
                return Outcome.failed(f"final output contains forbidden {s!r} at offset {at}")
        return Outcome.passed(f"final output contains none of {len(self.needles)} forbidden substring(s)")


class _RegexCheck(_OutputCheck):
    fields = {
        "pattern": Field({"type": "string"}, required=True, doc="A regular expression, searched (unanchored)."),
        "flags": Field({"type": "array", "items": {"enum": sorted(REGEX_FLAGS)}, "uniqueItems": True}, default=[],
                       doc="i: ignore case, m: ^/$ match at line breaks, s: `.` matches newlines."),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.pattern: str = values.get("pattern") or ""
        flags = 0
        for f in values.get("flags") or []:
            flags |= REGEX_FLAGS[f]
        self.regex = ctx.compile_regex(self.pattern, field="pattern", flags=flags) if self.pattern else None
        # Text beyond this is not searched; a search that did not reach the end cannot pass.
        self.max_chars = int(ctx.settings.get("regex_timeout_chars") or DEFAULT_REGEX_CHARS)

    def _search(self, text: str) -> tuple[Optional[re.Match[str]], bool]:
        cut = len(text) > self.max_chars
        assert self.regex is not None
        return self.regex.search(text[: self.max_chars] if cut else text), cut


@register_expected
class RegexMatch(_RegexCheck):
    type_name = "regex_match"
    doc = "The final output must match the regular expression (searched anywhere in the text)."

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        if not self.pattern:
            ctx.error(E_CFG_VACUOUS, "`pattern` is empty: it matches every response, so the check cannot fail",
                      field="pattern", hint="give a pattern the response must match")

    def check_text(self, text: str) -> Outcome:
        if self.regex is None:
            return Outcome.inconclusive("the pattern did not compile")
        m, cut = self._search(text)
        if m is not None:
            return Outcome.passed(f"final output matches /{self.pattern}/ at offset {m.start()}")
        if cut:
            return Outcome.inconclusive(f"no match for /{self.pattern}/ in the first {self.max_chars} characters; the rest was not searched")
        return Outcome.failed(f"final output does not match /{self.pattern}/")


@register_expected
class RegexNotMatch(_RegexCheck):
    type_name = "regex_not_match"
    doc = "The final output must not match the regular expression anywhere."

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        if not self.pattern:
            ctx.error(E_CFG_UNSATISFIABLE, "`pattern` is empty: it matches every response, so no response could pass",
                      field="pattern", hint="give the pattern that must not appear")

    def check_text(self, text: str) -> Outcome:
        if self.regex is None:
            return Outcome.inconclusive("the pattern did not compile")
        m, cut = self._search(text)
        if m is not None:
            return Outcome.failed(f"final output matches forbidden /{self.pattern}/ at offset {m.start()}")
        if cut:
            return Outcome.inconclusive(f"only the first {self.max_chars} characters were searched for /{self.pattern}/")
        return Outcome.passed(f"final output does not match /{self.pattern}/")


@register_expected
class JsonSchemaCheck(_OutputCheck):
    type_name = "json_schema"
    doc = "The final output must parse as JSON and validate against the schema (compiled at load)."
    fields = {
        "json_schema": Field({"type": ["string", "object", "boolean"]},
                             doc="The JSON Schema, as a JSON string or inline YAML."),
        "schema_file": Field({"type": "string", "minLength": 1},
                             doc="Path to a JSON/YAML schema file (relative to the rules file), instead of `json_schema`."),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.schema: Any = MISSING
        self.validator: Any = None
        inline = values.get("json_schema", MISSING)
        has_inline = given(values, "json_schema") and inline != ""
        if has_inline and given(values, "schema_file"):
            ctx.error(E_CFG_CONFLICT, "give the schema once: `json_schema` or `schema_file`, not both", field="schema_file")
            return
        if given(values, "schema_file"):
            self.schema = load_policy_file(values["schema_file"], ctx, "schema_file")
            if self.schema is MISSING:
                return
        elif has_inline:
            if isinstance(inline, str):
                try:
                    self.schema = json.loads(inline)
                except ValueError as exc:
                    ctx.error("E_CFG_SCHEMA", f"`json_schema` is not valid JSON: {exc}", field="json_schema",
                              hint="write the schema as a JSON string, or as a YAML mapping")
                    return
            else:
                self.schema = inline
        else:
            ctx.error(E_CFG_VACUOUS, "`json_schema` needs a schema: give `json_schema` or `schema_file`", field="json_schema")
            return
        self.validator = ctx.compile_schema(self.schema, field="json_schema")

    def ineffective_reason(self) -> Optional[str]:
        if self.validator is not None and schema_is_vacuous(self.schema):
            return "the JSON Schema accepts every JSON value, so the check only tests that the response parses"
        return None

    def check_text(self, text: str) -> Outcome:
        if self.validator is None:
            return Outcome.inconclusive("the schema did not compile")
        try:
            value = json.loads(text)
        except ValueError as exc:
            return Outcome.failed(f"final output is not valid JSON: {exc}")
        problems = validation_messages(self.validator, value)
        if problems:
            return Outcome.failed("final output violates the JSON Schema: " + "; ".join(problems))
        return Outcome.passed("final output is valid against the JSON Schema")


Embedder = Callable[[str], Sequence[float]]


def resolve_embedder(setting: Any, ctx: BuildContext, field: str = "semantic_similarity_to") -> Optional[Embedder]:
    """The configured embedder: a callable, or a "module:function" string resolved here. Reports
    ``E_CFG_EMBEDDER`` (and returns None) when none is configured or it cannot be loaded."""
    if setting is None:
        ref = ctx.settings.get("embedder_ref")
        if ref:  # the loader already said why it could not load it
            ctx.error(E_CFG_EMBEDDER, f"`semantic_similarity_to` needs an embedder, and settings.embedder {ref!r} "
                      "could not be loaded", field=field)
        else:
            ctx.error(E_CFG_EMBEDDER, "`semantic_similarity_to` needs an embedder, and none is configured",
                      field=field,
                      hint="set settings.embedder: 'module:function' (a function from text to a vector of floats)")
        return None
    if callable(setting):
        return setting  # type: ignore[no-any-return]
    if isinstance(setting, str) and ":" in setting:
        module_name, _, attr = setting.partition(":")
        try:
            fn = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            ctx.error(E_CFG_EMBEDDER, f"cannot load embedder {setting!r}: {exc}", field=field,
                      hint="settings.embedder must name an importable function, as module:function")
            return None
        if callable(fn):
            return fn  # type: ignore[no-any-return]
    ctx.error(E_CFG_EMBEDDER, f"settings.embedder {setting!r} is not a function", field=field,
              hint="give settings.embedder as module:function")
    return None


def cosine_similarity(a: Sequence[float], b: Sequence[float]) -> Optional[float]:
    """Cosine of two equal-length vectors; None when undefined (length mismatch or a zero vector)."""
    if len(a) != len(b) or not a:
        return None
    dot = sum(float(x) * float(y) for x, y in zip(a, b))
    na = math.sqrt(sum(float(x) * float(x) for x in a))
    nb = math.sqrt(sum(float(y) * float(y) for y in b))
    if na == 0.0 or nb == 0.0:
        return None
    return dot / (na * nb)


@register_expected
class SemanticSimilarityTo(_OutputCheck):
    type_name = "semantic_similarity_to"
    doc = ("The cosine similarity between the embeddings of the final output and a reference text must be at "
           "least `min_score`. Needs `settings.embedder` (module:function, text -> vector); without one the "
           "rules file is refused, never passed.")
    fields = {
        "semantic_similarity_to": Field({"type": "string", "minLength": 1}, doc="The reference text."),
        "text": Field({"type": "string", "minLength": 1}, doc="Alias of `semantic_similarity_to`."),
        "min_score": Field({"type": "number", "minimum": -1, "maximum": 1, "default": DEFAULT_MIN_SCORE},
                           doc="Smallest passing cosine similarity (default 0.80)."),
        "threshold": Field({"type": "number", "minimum": -1, "maximum": 1}, doc="Alias of `min_score`."),
        "thresholding": Field({"type": "object", "properties": {"max_drop": {"type": "number", "minimum": 0}},
                               "additionalProperties": False},
                              doc="Assay's baseline tolerance; accepted for compatibility, has no effect."),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        if given(values, "semantic_similarity_to") and given(values, "text"):
            ctx.error(E_CFG_CONFLICT, "give the reference once: `semantic_similarity_to` or its alias `text`", field="text")
        self.reference: str = values.get("semantic_similarity_to") or values.get("text") or ""
        if not self.reference:
            ctx.error(E_CFG_VACUOUS, "`semantic_similarity_to` needs the reference text", field="semantic_similarity_to")
        if given(values, "min_score") and given(values, "threshold"):
            ctx.error(E_CFG_CONFLICT, "give the bound once: `min_score` or its alias `threshold`", field="threshold")
        score = values.get("min_score") if given(values, "min_score") else values.get("threshold")
        self.min_score = float(score) if score is not None and score is not MISSING else DEFAULT_MIN_SCORE
        if given(values, "thresholding"):
            ctx.warn(W_CFG_NO_EFFECT, "`thresholding` tunes baseline comparisons, which spanassert does not run; it has no effect",
                     field="thresholding")
        ref_key = "text" if given(values, "text") else "semantic_similarity_to"
        self.embedder = resolve_embedder(ctx.settings.get("embedder"), ctx, ref_key)
        self._reference_vector: Optional[Sequence[float]] = None

    def ineffective_reason(self) -> Optional[str]:
        if self.min_score <= -1 + 1e-6:
            return f"min_score {self.min_score} is at the floor of cosine similarity, so every response passes"
        return None

    def _embed(self, text: str) -> Sequence[float]:
        assert self.embedder is not None
        return [float(x) for x in self.embedder(text)]

    def check_text(self, text: str) -> Outcome:
        if self.embedder is None:
            return Outcome.inconclusive("no embedder is configured")
        try:
            if self._reference_vector is None:
                self._reference_vector = self._embed(self.reference)
            vector = self._embed(text)
        except Exception as exc:  # noqa: BLE001 - an embedder failure is an unknown, not a crash
            # Only the exception type: its text may quote the (unredacted) output.
            return Outcome.inconclusive(f"the embedder failed ({type(exc).__name__})")
        score = cosine_similarity(vector, self._reference_vector)
        if score is None:
            return Outcome.inconclusive(
                f"cosine similarity is undefined (vector lengths {len(vector)} and {len(self._reference_vector)}, or a zero vector)")
        if score >= self.min_score:
            return Outcome.passed(f"cosine similarity {score:.3f} is at least min_score {self.min_score:.2f}")
        return Outcome.failed(f"cosine similarity {score:.3f} is below min_score {self.min_score:.2f}")


# -- recorded-call checks -------------------------------------------------------------------------
def _compile_tool_schemas(schemas: Mapping[str, Any], ctx: BuildContext, field: str,
                          shared_defs: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for tool, schema in schemas.items():
        if tool in _SCHEMA_KEYWORDS:
            ctx.error(E_CFG_POLICY,
                      f"`{tool}` is a JSON Schema keyword, not a tool name: this takes a map {{tool: JSON Schema}}",
                      field=f"{field}.{tool}", hint="nest the schema under the tool's name")
            continue
        warn_tool_name(ctx, tool, f"{field}.{tool}", instead="the keys of this map are exact tool names (Assay's "
                       "semantics); to check calls by pattern use `trace_args_valid` or `trace_tool_result` with "
                       "`tool_pattern:`")
        if shared_defs and isinstance(schema, dict):
            schema = dict(schema)
            schema["$defs"] = {**shared_defs, **(schema.get("$defs") or {})}
        validator = ctx.compile_schema(schema, field=f"{field}.{tool}")
        if validator is not None:
            out[tool] = (schema, validator)
    return out


# Keys that mark Assay's structured (v2) tool policy, which this map-based check does not evaluate.
_STRUCTURED_POLICY_KEYS = frozenset({"version", "name", "tools", "schemas", "allow", "deny", "enforcement"})


class _ToolSchemaCheck(Assertion):
    """Shared evaluation of ``args_valid`` and ``tool_output_valid``: each call of a tool with a
    schema must validate; calls whose content was not recorded make the verdict inconclusive. The
    close verdict follows the rule every per-call check shares (``every_call_outcome``): no call of
    a tool with a schema in a complete episode is ``not_applicable``."""

    kind_label = "arguments"
    violates = "violate"
    was = "were"
    order_free = True  # a failure at a call depends on that call alone (serve checks it on arrival)
    evidence_kind = EVIDENCE_ARGUMENTS

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.schemas: Dict[str, Any] = {}
        self._names_arguments: Dict[str, bool] = {}

    def _finalise(self) -> None:
        self.tools = frozenset(self.schemas)

    def ineffective_reason(self) -> Optional[str]:
        if self.schemas and all(schema_is_vacuous(s) for s, _ in self.schemas.values()):
            return f"every tool schema accepts any {self.kind_label}, so the check cannot fail"
        return None

    def new_state(self) -> EveryCallState:
        return EveryCallState()

    def _content(self, call: ToolCall) -> tuple[Any, str]:
        raise NotImplementedError

    def _unjudgeable(self, call: ToolCall) -> Optional[str]:
        """Why ``call``'s content cannot be checked against its schema; None when it can."""
        value, content_state = self._content(call)
        if content_state == CONTENT_MISSING:
            return f"its {self.kind_label} {self.was} not recorded"
        if content_state != CONTENT_OK:
            return f"its {self.kind_label} {self.was} recorded but could not be parsed (truncated?)"
        return None

    def _validate(self, state: EveryCallState, call: ToolCall, value: Any) -> Optional[Failure]:
        entry = self.schemas.get(call.name)
        if entry is None:
            return None
        problems = validation_messages(entry[1], value)
        if not problems:
            return None
        msg = (f"`{call.name}` {self.kind_label} at {call_ref(call)} {self.violates} its schema: " + "; ".join(problems)
               + evidence_suffix(self, value, self.evidence_kind))
        return state.fail(call, msg)

    def on_call_start(self, state: EveryCallState, call: ToolCall) -> Optional[Failure]:
        if call.name in self.schemas:
            state.open += 1
        return None

    def on_call_end(self, state: EveryCallState, call: ToolCall) -> Optional[Failure]:
        if call.name not in self.schemas:
            return None
        state.open = max(0, state.open - 1)  # an end whose start was not seen must not go negative
        why = self._unjudgeable(call)
        if why is not None:
            state.undecide(call, why)
            return None
        state.checked += 1
        if self.evidence_kind == EVIDENCE_ARGUMENTS and call.args_at_start:
            return None  # judged at start, and the end carries the same arguments
        return self._validate(state, call, self._content(call)[0])

    def on_close(self, state: EveryCallState, episode: EpisodeView) -> Outcome:
        subject = "calls of " + ", ".join(f"`{t}`" for t in sorted(self.schemas))
        return every_call_outcome(state, episode, subject, f"had {self.kind_label} valid against its schema")


@register_expected
class ArgsValidExpected(_ToolSchemaCheck):
    type_name = "args_valid"
    doc = ("Every recorded call of a tool that has a schema must have arguments valid against it; tools "
           "without a schema are not checked. Unrecorded arguments make the verdict inconclusive.")
    fields = {
        "schema": Field(TOOL_SCHEMA_MAP, doc="Inline map {tool: JSON Schema of its arguments}."),
        "policy": Field({"type": "string", "minLength": 1},
                        doc="Path to a YAML/JSON file holding such a map (relative to the rules file)."),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.needs = frozenset({NEED_ARGUMENTS})
        if not given(values, "schema") and not given(values, "policy"):
            ctx.error(E_CFG_VACUOUS, "`args_valid` needs `schema` or `policy`: with neither it checks nothing",
                      field="schema", hint="give `schema: {tool: JSON Schema}` or `policy: path/to/schemas.yaml`")
            self._finalise()
            return
        errors_before = len(ctx.errors)
        merged: Dict[str, Any] = {}
        if given(values, "schema"):
            merged.update(values["schema"])
        if given(values, "policy"):
            loaded = load_policy_file(values["policy"], ctx, "policy")
            if loaded is not MISSING:
                if not isinstance(loaded, dict):
                    ctx.error(E_CFG_POLICY, f"policy file {values['policy']!r} must hold a map {{tool: JSON Schema}}",
                              field="policy")
                elif _STRUCTURED_POLICY_KEYS & set(loaded):
                    ctx.error(E_CFG_POLICY,
                              f"policy file {values['policy']!r} looks like a structured tool policy; `expected: args_valid` "
                              "takes a map {tool: JSON Schema}", field="policy")
                else:
                    for tool in loaded:
                        if tool in merged:
                            ctx.error(E_CFG_CONFLICT, f"tool `{tool}` has a schema both inline and in the policy file",
                                      field=f"schema.{tool}")
                    merged.update({k: v for k, v in loaded.items() if k not in merged})
        if not merged and len(ctx.errors) == errors_before:
            ctx.error(E_CFG_VACUOUS, "`args_valid` has no tool schemas, so it checks nothing", field="schema")
        self.schemas = _compile_tool_schemas(merged, ctx, "schema")
        # A schema on named arguments cannot judge a bare value nobody could bind to a name.
        self._names_arguments = {tool: schema_names_arguments(schema) for tool, (schema, _) in self.schemas.items()}
        self._finalise()

    def _content(self, call: ToolCall) -> tuple[Any, str]:
        return call.arguments, call.arguments_state

    def _unjudgeable(self, call: ToolCall) -> Optional[str]:
        why = super()._unjudgeable(call)
        if why is None and not call.arguments_named and self._names_arguments.get(call.name, True):
            return call.arguments_problem
        return why

    def on_call_start(self, state: EveryCallState, call: ToolCall) -> Optional[Failure]:
        super().on_call_start(state, call)
        # With content when the arguments were on the span at its start (the engine reads them then).
        if call.name in self.schemas and self._unjudgeable(call) is None:
            return self._validate(state, call, call.arguments)
        return None


@register_expected
class ToolOutputValid(_ToolSchemaCheck):
    type_name = "tool_output_valid"
    doc = ("Every recorded result of a tool that has a schema must be valid against it. A top-level `$defs` "
           "entry is shared by every tool schema.")
    kind_label = "result"
    violates = "violates"
    was = "was"
    evidence_kind = EVIDENCE_RESULT
    fields = {
        "schemas": Field(dict(TOOL_SCHEMA_MAP, minProperties=1), required=True,
                         doc="Map {tool: JSON Schema of its result}; `$defs` is shared."),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.needs = frozenset({NEED_RESULT})
        raw = dict(values.get("schemas") or {})
        shared = raw.pop("$defs", None)
        if not raw:
            ctx.error(E_CFG_VACUOUS, "`schemas` names no tool, so `tool_output_valid` checks nothing", field="schemas")
        self.schemas = _compile_tool_schemas(raw, ctx, "schemas", shared if isinstance(shared, dict) else None)
        self._finalise()

    def _content(self, call: ToolCall) -> tuple[Any, str]:
        return call.result, call.result_state


@register_expected
class ToolBlocklistExpected(Assertion):
    type_name = "tool_blocklist"
    order_free = True  # a failure at a call depends on that call alone (serve checks it on arrival)
    doc = "No recorded call may have a blocked name (exact match). Reported when the call starts."
    fields = {
        "blocked": Field({"type": "array", "items": {"type": "string", "minLength": 1}}, required=True,
                         doc="Tool names that must not be called."),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        blocked = list(values.get("blocked") or [])
        if not blocked:
            ctx.error(E_CFG_VACUOUS, "`blocked` is empty: a blocklist with no names admits every call",
                      field="blocked", hint="list the tool names that must not be called")
        for i, name in enumerate(blocked):
            warn_tool_name(ctx, name, f"blocked[{i}]", instead="`blocked` names are exact (Assay's semantics); "
                           "to block by pattern use `trace_must_not_call_tool` with `tool_pattern:`")
        self.blocked = frozenset(blocked)
        self.tools = self.blocked
        self.reports_at_start = True

    def new_state(self) -> List[Optional[str]]:
        return [None]  # the first violation's message

    def on_call_start(self, state: List[Optional[str]], call: ToolCall) -> Optional[Failure]:
        if call.name not in self.blocked:
            return None
        msg = f"blocked tool `{call.name}` called at {call_ref(call)}"
        if state[0] is None:
            state[0] = msg
        return Failure.at(call, msg)

    def on_close(self, state: List[Optional[str]], episode: EpisodeView) -> Outcome:
        if state[0] is not None:
            return Outcome.failed(state[0])
        return Outcome.passed(f"none of {len(self.blocked)} blocked tool(s) was called")


# -- sequence_valid -------------------------------------------------------------------------------
_POLICY_KEYS = frozenset({"version", "name", "metadata", "tools", "sequences", "aliases", "on_error"})


class _SequenceValidState:
    __slots__ = ("rules", "pending", "count", "sequence_failure", "violation", "started")

    def __init__(self, rules: List[RuleState]) -> None:
        self.rules = rules
        # Calls started but not yet fed to the rules: rules see calls in start order, and a call
        # whose arguments a rule needs waits here until its span ends (bounded by calls in flight).
        self.pending: Deque[ToolCall] = collections.deque()
        self.count = 0
        self.sequence_failure: Optional[str] = None
        self.violation: Optional[RuleEvaluation] = None
        self.started = 0


@register_expected
class SequenceValidExpected(Assertion):
    type_name = "sequence_valid"
    decides_on_close = True
    doc = ("Sequence rules (require, before, blocklist, max_calls, eventually, after, never_after, sequence) "
           "over the recorded calls, failing on the first violation, and/or the exact list of tool names "
           "(`sequence: []` means no tool calls at all). When every rule had nothing to check the verdict "
           "is not_applicable.")
    fields = {
        "sequence": Field({"type": "array", "items": {"type": "string", "minLength": 1}},
                          doc="The exact tool names, in call order; `[]` means no tool calls."),
        "rules": Field({"type": "array", "items": RULE_ITEM_SCHEMA}, doc="Sequence rules (see the rule reference)."),
        "policy": Field({"type": "string", "minLength": 1},
                        doc="Path to a YAML/JSON file: a list of tool names, a list of rules, or a policy "
                            "{version, sequences, aliases}."),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.sequence: Optional[List[str]] = list(values["sequence"]) if given(values, "sequence") else None
        inline_rules: Optional[List[Any]] = list(values["rules"]) if given(values, "rules") else None
        policy_rules: List[Any] = []
        aliases: Dict[str, Any] = {}
        has_policy = given(values, "policy")
        if inline_rules == [] and self.sequence is None:
            ctx.error(E_CFG_VACUOUS,
                      "`rules: []` checks nothing (a policy file does not make empty inline rules effective)",
                      field="rules", hint="give at least one rule, or an exact `sequence`")
        if not has_policy and self.sequence is None and inline_rules is None:
            ctx.error(E_CFG_VACUOUS, "`sequence_valid` needs `sequence`, `rules` or `policy`: with none it checks nothing",
                      field="rules")
        if has_policy:
            path = values["policy"]
            loaded = load_policy_file(path, ctx, "policy")
            if loaded is MISSING:
                pass
            elif isinstance(loaded, list) and all(isinstance(x, str) for x in loaded) and loaded:
                if self.sequence is not None:
                    ctx.error(E_CFG_CONFLICT, f"`sequence` is given both inline and by policy file {path!r}", field="sequence")
                else:
                    self.sequence = list(loaded)
            elif isinstance(loaded, list):
                policy_rules = loaded
            elif isinstance(loaded, dict):
                unknown = sorted(set(loaded) - _POLICY_KEYS)
                if unknown:
                    ctx.error(E_CFG_POLICY, f"policy file {path!r} has unknown key(s) {unknown}", field="policy",
                              hint="a sequence policy holds version, name, metadata, sequences, aliases, on_error")
                if loaded.get("tools"):
                    ctx.error(E_CFG_POLICY,
                              f"policy file {path!r} sets `tools` (allow/deny), which `sequence_valid` does not enforce",
                              field="policy", hint="check forbidden tools with `tool_blocklist` or `trace_must_not_call_tool`")
                policy_rules = list(loaded.get("sequences") or [])
                raw_aliases = loaded.get("aliases") or {}
                if not isinstance(raw_aliases, dict) or not all(
                        isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))
                        for v in raw_aliases.values()):
                    ctx.error(E_CFG_POLICY, f"policy file {path!r}: `aliases` must map a name to a tool name or a list of them",
                              field="policy")
                else:
                    aliases = dict(raw_aliases)
            else:
                ctx.error(E_CFG_POLICY, f"policy file {path!r} must hold a list of tool names, a list of rules, or a policy mapping",
                          field="policy")
            if loaded is not MISSING and not policy_rules and not inline_rules and self.sequence is None:
                ctx.error(E_CFG_VACUOUS, f"policy file {path!r} holds no rules and no sequence, so this checks nothing",
                          field="policy")
        self.rules: List[Rule] = parse_rules(inline_rules or [], ctx, "rules", aliases)
        self.rules += parse_rules(policy_rules, ctx, f"policy({values.get('policy')})", aliases)
        for i, name in enumerate(self.sequence if given(values, "sequence") and self.sequence else []):
            warn_tool_name(ctx, name, f"sequence[{i}]", instead="these names are exact; to select calls by "
                           "pattern write a `sequence` rule with operands `{tool_pattern: REGEX}`")
        arg_tools = set()
        arg_patterns = []
        for r in self.rules:
            for op in r.all_operands():
                if op.reads_arguments:
                    arg_tools |= op.tools
                    arg_patterns += [sel.pattern for sel in op.selectors if sel.pattern is not None]
        self._argument_tools: FrozenSet[str] = frozenset(arg_tools)
        self._argument_patterns: Tuple[Pattern[str], ...] = tuple(arg_patterns)
        self.needs = frozenset({NEED_ARGUMENTS}) if arg_tools or arg_patterns else frozenset()
        self.tools = None  # positions and windows count every call

    def named_tools(self) -> FrozenSet[str]:
        names = set(self.sequence or ())
        for r in self.rules:
            for op in r.all_operands():
                names |= op.tools
        return frozenset(names)

    def new_state(self) -> _SequenceValidState:
        return _SequenceValidState([r.new_state() for r in self.rules])

    def _ready(self, call: ToolCall) -> bool:
        if call.ended or call.arguments_state != CONTENT_MISSING:
            return True
        if call.name in self._argument_tools:
            return False
        return not any(p.fullmatch(call.name) for p in self._argument_patterns)

    def _drain(self, state: _SequenceValidState, force: bool = False) -> Optional[Failure]:
        first: Optional[Failure] = None
        while state.pending and (force or self._ready(state.pending[0])):
            call = state.pending.popleft()
            for rs in state.rules:
                ev = rs.feed(call)
                if ev is not None:
                    if state.violation is None:
                        state.violation = ev
                    if first is None:
                        first = Failure.at(call, f"sequence_valid rule failed: {ev.reason}")
        return first

    def on_call_start(self, state: _SequenceValidState, call: ToolCall) -> Optional[Failure]:
        position = state.count
        state.count += 1
        failure: Optional[Failure] = None
        if self.sequence is not None and state.sequence_failure is None:
            if position >= len(self.sequence):
                state.sequence_failure = (f"expected exactly {len(self.sequence)} tool call(s), but `{call.name}` at "
                                          f"{call_ref(call)} is one more")
            elif call.name != self.sequence[position]:
                state.sequence_failure = (f"expected `{self.sequence[position]}` as call #{position + 1} of the sequence, "
                                          f"found `{call.name}` at {call_ref(call)}")
            if state.sequence_failure is not None:
                failure = Failure.at(call, state.sequence_failure)
        if self.rules:
            state.pending.append(call)
            rule_failure = self._drain(state)
            failure = rule_failure or failure
        return failure

    def on_call_end(self, state: _SequenceValidState, call: ToolCall) -> Optional[Failure]:
        return self._drain(state) if self.rules else None

    def evaluations(self, state: _SequenceValidState, complete: bool) -> List[RuleEvaluation]:
        self._drain(state, force=True)
        return [rs.finish(complete) for rs in state.rules]

    def on_close(self, state: _SequenceValidState, episode: EpisodeView) -> Outcome:
        evs = self.evaluations(state, episode.decidable)
        violated = [e for e in evs if e.outcome == VIOLATED]
        if violated:
            first = state.violation or violated[0]
            return Outcome.failed(f"sequence_valid rule failed: {first.reason}", first.span_id)
        if state.sequence_failure is not None:
            return Outcome.failed(state.sequence_failure)
        if self.sequence is not None and state.count < len(self.sequence):
            missing = self.sequence[state.count]
            if not episode.decidable:
                return Outcome.inconclusive(
                    f"{state.count} of {len(self.sequence)} expected call(s) seen before the episode was cut short")
            return Outcome.failed(f"expected {len(self.sequence)} tool call(s), the episode ended after {state.count}: "
                                  f"`{missing}` (call #{state.count + 1} of the sequence) never came")
        unsure = [e for e in evs if e.outcome == INCONCLUSIVE]
        if unsure:
            return Outcome.inconclusive(f"rule {unsure[0].rule_id} undecided: {unsure[0].reason}")
        if evs and self.sequence is None and all(e.outcome == NOT_EXERCISED for e in evs):
            reasons = "; ".join(f"{e.rule_id}: {e.reason}" for e in evs)
            return Outcome.not_applicable(f"every sequence rule was vacuous for this episode ({reasons})")
        held = sum(1 for e in evs if e.outcome == HELD)
        parts = []
        if evs:
            parts.append(f"{held} rule(s) held, {len(evs) - held} not exercised")
        if self.sequence is not None:
            parts.append(f"exact sequence of {len(self.sequence)} call(s) matched")
        return Outcome.passed("; ".join(parts))


# -- declared but not executable here -------------------------------------------------------------
def _not_executable(type_name: str, fields: Dict[str, Field], why: str, hint: str) -> type:
    class NotExecutable(Assertion):
        doc = f"Not executable by spanassert: {why}"
        executable = False

        def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
            super().__init__(test_id, index, values, ctx)
            self.tools = frozenset()
            ctx.error(E_CFG_NOT_EXECUTABLE, f"`expected: {type_name}` is not executable by spanassert: {why}",
                      field="type", hint=hint)

        def on_close(self, state: Any, episode: EpisodeView) -> Outcome:
            return Outcome.inconclusive(f"`{type_name}` is not executable by spanassert")

    NotExecutable.type_name = type_name
    NotExecutable.fields = fields
    NotExecutable.__name__ = NotExecutable.__qualname__ = "".join(p.title() for p in type_name.split("_"))
    register_expected(NotExecutable)
    return NotExecutable


_JUDGE_FIELDS = {
    "min_score": Field({"type": "number"}, doc="Judge score bound (Assay)."),
    "rubric_version": Field({"type": "string"}, doc="Judge rubric (Assay)."),
    "thresholding": Field({"type": "object"}, doc="Baseline tolerance (Assay)."),
}
_JUDGE_WHY = "it is scored by an LLM judge, and spanassert runs no judge, so it could only guess"
_JUDGE_HINT = "check the final output with must_contain, regex_match, json_schema or semantic_similarity_to"

Faithfulness = _not_executable("faithfulness", dict(_JUDGE_FIELDS), _JUDGE_WHY, _JUDGE_HINT)
Relevance = _not_executable("relevance", dict(_JUDGE_FIELDS), _JUDGE_WHY, _JUDGE_HINT)
JudgeCriteria = _not_executable(
    "judge_criteria", {"judge_criteria": Field({}, doc="Judge criteria (Assay).")}, _JUDGE_WHY, _JUDGE_HINT)
ToolDescriptionIntegrity = _not_executable(
    "tool_description_integrity",
    {"pinned_tools": Field({"type": "array"}, doc="Pinned tool definitions (Assay).")},
    "it compares tool definitions (descriptions and input schemas), which tool-call spans do not carry",
    "pin tool definitions where they are served (e.g. an MCP proxy); spans cannot show them",
)
ToolCollisionDetect = _not_executable(
    "tool_collision_detect",
    {"trusted_servers": Field({"type": "array", "items": {"type": "string"}}, doc="Trusted servers (Assay).")},
    "it needs the tool definitions each server registered, which tool-call spans do not carry",
    "detect tool-name collisions where tool lists are served; spans cannot show them",
)

__all__ = [
    "MustContain",
    "MustNotContain",
    "RegexMatch",
    "RegexNotMatch",
    "JsonSchemaCheck",
    "SemanticSimilarityTo",
    "ArgsValidExpected",
    "ToolOutputValid",
    "ToolBlocklistExpected",
    "SequenceValidExpected",
    "Faithfulness",
    "Relevance",
    "JudgeCriteria",
    "ToolDescriptionIntegrity",
    "ToolCollisionDetect",
    "cosine_similarity",
    "resolve_embedder",
    "load_policy_file",
    "E_CFG_VACUOUS",
    "E_CFG_UNSATISFIABLE",
    "E_CFG_POLICY",
    "E_CFG_EMBEDDER",
    "E_CFG_NOT_EXECUTABLE",
]
