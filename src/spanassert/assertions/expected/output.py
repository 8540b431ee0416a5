"""Output checks: the episode's final output text must contain, must not contain, match, or be
valid JSON against a schema. They decide when the episode closes; an output not recorded, or an
episode cut short, leaves them inconclusive, never passed.
"""
from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Mapping, Optional

from ...core.model import MISSING, EpisodeView, Outcome
from ..base import NEED_FINAL_OUTPUT, Assertion, BuildContext, Field
from ..registry import register_expected
from ..schema_util import schema_is_vacuous, validation_messages
from .common import (
    E_CFG_UNSATISFIABLE,
    E_CFG_VACUOUS,
    W_CFG_NO_EFFECT,
    given,
    load_policy_file,
)

DEFAULT_REGEX_CHARS = 100_000

REGEX_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}



class OutputCheck(Assertion):
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
            return Outcome.inconclusive(f"the episode did not complete (closed by {reason}), so its final output is "
                                        "not final")
        return self.check_text(text)

    def check_text(self, text: str) -> Outcome:
        raise NotImplementedError


def _string_list(values: Mapping[str, Any], key: str) -> List[str]:
    v = values.get(key)
    if isinstance(v, str):  # legacy scalar form
        return [v]
    return list(v) if isinstance(v, list) else []


class MustContain(OutputCheck):
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
                      hint="list at least one substring, or drop `expected:` and keep the test's checks in "
                           "`assertions:`")
        for i, s in enumerate(self.needles):
            if s == "":
                ctx.error(E_CFG_VACUOUS,
                          f"`must_contain` entry #{i} is the empty string, which every response contains, so it "
                          "checks nothing",
                          field=f"must_contain[{i}]", hint="remove the empty entry")

    def check_text(self, text: str) -> Outcome:
        absent = [s for s in self.needles if s not in text]
        if not absent:
            return Outcome.passed(f"final output contains all {len(self.needles)} required substring(s)")
        more = f" (and {len(absent) - 1} more)" if len(absent) > 1 else ""
        return Outcome.failed(f"final output does not contain {absent[0]!r}{more}")


register_expected(MustContain)


class MustNotContain(OutputCheck):
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
                          f"`must_not_contain` entry #{i} is the empty string: every response contains it, so no "
                          "response could pass",
                          field=f"must_not_contain[{i}]", hint="remove the empty entry")

    def check_text(self, text: str) -> Outcome:
        for s in self.needles:
            at = text.find(s)
            if at >= 0:
                return Outcome.failed(f"final output contains forbidden {s!r} at offset {at}")
        return Outcome.passed(f"final output contains none of {len(self.needles)} forbidden substring(s)")


register_expected(MustNotContain)


class _RegexCheck(OutputCheck):
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
            return Outcome.inconclusive(f"no match for /{self.pattern}/ in the first {self.max_chars} characters; the "
                                        "rest was not searched")
        return Outcome.failed(f"final output does not match /{self.pattern}/")


register_expected(RegexMatch)


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
            return Outcome.inconclusive(f"only the first {self.max_chars} characters were searched for "
                                        f"/{self.pattern}/")
        return Outcome.passed(f"final output does not match /{self.pattern}/")


register_expected(RegexNotMatch)


class JsonSchemaCheck(OutputCheck):
    type_name = "json_schema"
    doc = "The final output must parse as JSON and validate against the schema (compiled at load)."
    fields = {
        "json_schema": Field({"type": ["string", "object", "boolean"]},
                             doc="The JSON Schema, as a JSON string or inline YAML."),
        "schema_file": Field({"type": "string", "minLength": 1},
                             doc="Path to a JSON/YAML schema file (relative to the rules file); when given, it is "
                                 "the schema and `json_schema` is not read (as in Assay)."),
    }

    def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
        super().__init__(test_id, index, values, ctx)
        self.schema: Any = MISSING
        self.validator: Any = None
        inline = values.get("json_schema", MISSING)
        has_inline = given(values, "json_schema") and inline != ""
        if has_inline and given(values, "schema_file"):
            # Assay accepts both and reads the file (validation.rs: schema_file replaces json_schema).
            ctx.warn(W_CFG_NO_EFFECT, "`json_schema` is not read when `schema_file` is given: the schema comes from "
                     "the file (as in Assay)", field="json_schema",
                     hint="remove `json_schema`, or set it to \"\" as a placeholder")
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
            ctx.error(E_CFG_VACUOUS, "`json_schema` needs a schema: give `json_schema` or `schema_file`",
                      field="json_schema", hint="e.g. `json_schema: {type: object, required: [status]}`, or "
                                                "`schema_file: answer.schema.json`")
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


register_expected(JsonSchemaCheck)
