"""Building one assertion from its rules-file entry: the type looked up in its registry, its keys
checked against the type's declared fields, the class built with a :class:`LoaderBuildContext` that
positions what it reports, then refused when it cannot fail. ``expected:`` blocks (tagged, legacy
keys, ``$ref``) are read here too."""
from __future__ import annotations

import copy
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Type

from ..assertions.base import COMMON_FIELDS, Assertion, BuildContext, Field
from ..assertions.registry import EXPECTED_TYPES
from ..core.model import MISSING, Outcome
from ..core.suggest import did_you_mean
from . import codes
from .fields import MISSING_KEY, UNKNOWN_KEY, ValueProblem, field_problems, kind_of
from .keypath import KeyPath, parse_field_path
from .model import Settings
from .reporter import Reporter
from .schema import EXPECTED_TYPE_ALIASES, LEGACY_EXPECTED
from .source import Document

ORIGIN_EXPECTED = "expected"
ORIGIN_ASSERTIONS = "assertions"
# What AssertionBuilder.run_type_code returns when the type's own code raised.
RAISED: Any = object()


class LoaderBuildContext(BuildContext):
    """The :class:`BuildContext` an assertion gets from the loader: its ``error``/``warn`` become
    diagnostics positioned at the named field (a dotted path below the assertion)."""

    def __init__(self, report: Reporter, path: KeyPath, *, type_name: str, origin: str,
                 evidence_key: Optional[bytes], base_dir: str, settings: Dict[str, Any]) -> None:
        super().__init__(evidence_key=evidence_key, base_dir=base_dir)
        self.settings = settings
        self.origin = origin
        self.type_name = type_name
        self._report = report
        self._path = path

    def _where(self, field: Optional[str]) -> KeyPath:
        return self._path + parse_field_path(field) if field else self._path

    def error(self, code: str, message: str, *, field: Optional[str] = None, hint: Optional[str] = None,
              at_key: bool = False) -> None:
        super().error(code, message, field=field, hint=hint)
        self._report.error(code, f"{self.type_name}: {message}", self._where(field), hint=hint, at_key=at_key)

    def warn(self, code: str, message: str, *, field: Optional[str] = None, hint: Optional[str] = None) -> None:
        super().warn(code, message, field=field, hint=hint)
        self._report.warn(code, f"{self.type_name}: {message}", self._where(field), hint=hint)


class AssertionBuilder:
    """The loader's part that builds checks (``assertions:`` entries, ``expected:`` blocks). State is
    set by the loader's ``__init__``; declared here for the type checker."""

    doc: Document
    report: Reporter
    settings: Settings
    embedder: Optional[Callable[..., Any]]
    allow_ineffective: bool
    untrusted: bool

    def unknown_key(self, key: str, path: KeyPath, allowed: Iterable[str], what: str) -> None:
        allowed_list = sorted(allowed)
        guess = did_you_mean(key, allowed_list)
        hint = f"did you mean `{guess}`?" if guess else "allowed keys: " + ", ".join(allowed_list)
        self.report.error(codes.E_CFG_UNKNOWN_KEY, f"unknown key `{key}` in {what}", (*path, key),
                          hint=hint, at_key=True)

    def value_error(self, problem: ValueProblem, path: KeyPath) -> None:
        code, message, sub, hint = problem
        self.report.error(code, message, path + sub, hint=hint)

    # -- expected ---------------------------------------------------------------------------------
    def load_expected(self, test_id: str, raw: Any, path: KeyPath) -> Optional[Assertion]:
        accepted = ("the tagged form (`type: must_contain` with `must_contain: [...]`, `type: sequence_valid`, ...) "
                    "or one of the legacy keys `must_contain`, `sequence`, `schema`")
        if raw is None:
            self.report.error(codes.E_CFG_EXPECTED, f"test `{test_id}`: `expected:` is null", path,
                              hint="give one check, e.g. `type: must_contain` with `must_contain: [...]`, "
                                   "or remove the `expected:` key")
            return None
        if isinstance(raw, list):
            if not raw:
                self.report.error(codes.E_CFG_EXPECTED, f"test `{test_id}`: `expected:` is an empty list", path,
                                  hint="give exactly one check, or remove the `expected:` key")
                return None
            if len(raw) > 1:
                self.report.error(
                    codes.E_CFG_EXPECTED_MULTIPLE,
                    f"test `{test_id}`: `expected:` has {len(raw)} entries but holds exactly one check",
                    path, hint="split the checks into separate tests, or move the extra checks to `assertions:`",
                )
                return None
            raw, path = raw[0], (*path, 0)
        if not isinstance(raw, dict):
            self.report.error(codes.E_CFG_EXPECTED, f"test `{test_id}`: `expected:` must be a mapping with one "
                              f"check, not {kind_of(raw)}", path, hint=f"use {accepted}")
            return None
        if "type" in raw:
            t = raw["type"]
            if isinstance(t, str) and t in EXPECTED_TYPE_ALIASES:
                raw = {**raw, "type": EXPECTED_TYPE_ALIASES[t]}
            return self.build(test_id, raw, path, 0, ORIGIN_EXPECTED, EXPECTED_TYPES, "expected check")
        keys = list(raw)
        if keys == ["$ref"]:
            self.report.error(codes.E_CFG_LEGACY_REF,
                              f"test `{test_id}`: `expected: {{$ref: ...}}` points to a separate file, which "
                              "version 1 does not read", (*path, "$ref"), at_key=True,
                              hint="copy the referenced check into this `expected:` block in the tagged form, or "
                                   f"run `spanassert migrate {self.doc.file or 'FILE'}`, which does that")
            return None
        if len(keys) == 1 and keys[0] in LEGACY_EXPECTED:
            key = keys[0]
            inner = raw[key]
            if key == "must_contain" and isinstance(inner, str):
                inner = [inner]
            return self.build(test_id, {"type": LEGACY_EXPECTED[key], key: inner}, path, 0, ORIGIN_EXPECTED,
                              EXPECTED_TYPES, "expected check")
        tagged = [str(k) for k in keys if k in EXPECTED_TYPES]
        if tagged:
            # A type's name used as a key (`tool_blocklist: {blocked: [...]}`): only the legacy keys
            # take that form.
            hint = (f"write it tagged: `type: {tagged[0]}` with its fields beside it, not `{tagged[0]}:` as "
                    f"a key. Use {accepted}")
        else:
            guesses = [g for g in (did_you_mean(str(k), list(LEGACY_EXPECTED) + sorted(EXPECTED_TYPES))
                                   for k in keys) if g]
            hint = (f"did you mean `{guesses[0]}`? " if guesses else "") + f"Use {accepted}"
        found = ", ".join(f"`{k}`" for k in keys) or "none"
        self.report.error(codes.E_CFG_EXPECTED, f"test `{test_id}`: unrecognised `expected:` block, found key(s) "
                          f"{found}", path, hint=hint)
        return None

    # -- one assertion ----------------------------------------------------------------------------
    def build(self, test_id: str, raw: Any, path: KeyPath, index: int, origin: str,
              registry: Mapping[str, Type[Assertion]], what: str) -> Optional[Assertion]:
        where = "`expected:`" if origin == ORIGIN_EXPECTED else f"assertion #{path[-1]}"  # its place in the list
        if not isinstance(raw, dict):
            self.report.error(codes.E_CFG_TYPE, f"test `{test_id}` {where} must be a mapping with `type:`, "
                              f"not {kind_of(raw)}", path,
                              hint="write it as `type: NAME` with the type's keys, e.g. `- {type: trace_max_steps, "
                                   "max: 10}`")
            return None
        type_name = raw.get("type")
        known = sorted(registry)
        if "type" not in raw:
            self.report.error(codes.E_CFG_REQUIRED, f"test `{test_id}` {where} has no `type`", path,
                              hint="add `type:`, one of: " + ", ".join(known))
            return None
        if not isinstance(type_name, str) or type_name not in registry:
            from .suggest import suggest_type

            guess, family = suggest_type(str(type_name), known)
            if not known:
                hint = "no types are registered"
            elif guess:
                hint = f"did you mean `{guess}`?"
                others = [f for f in family if f != guess]
                if others:
                    hint += " Related types: " + ", ".join(f"`{f}`" for f in others)
            else:
                hint = "known types: " + ", ".join(known)
            if known:
                hint += " (`spanassert schema` lists every type with its fields)"
            shown = str(type_name) if len(str(type_name)) <= 60 else f"{str(type_name)[:59]}…"
            self.report.error(codes.E_CFG_UNKNOWN_TYPE, f"unknown {what} type `{shown}`", (*path, "type"),
                              hint=hint)
            return None
        cls = registry[type_name]
        fields: Dict[str, Field] = {**COMMON_FIELDS, **cls.fields}
        before = self.report.error_count
        for p in field_problems(raw, fields, known=lambda key: key == "type"):
            if p.kind == UNKNOWN_KEY:
                self.unknown_key(p.key, path, [*fields, "type"], f"`{type_name}`")
            elif p.kind == MISSING_KEY and p.field is not None:
                self.report.error(codes.E_CFG_REQUIRED, f"`{type_name}` requires `{p.key}`", path,
                                  hint=f"add `{p.key}:`" + (f" ({p.field.doc})" if p.field.doc else ""))
            elif p.problem is not None:
                self.value_error(p.problem, (*path, p.key))
        values: Dict[str, Any] = {}
        for name, field in fields.items():
            if name in raw:
                values[name] = raw[name]
            elif not field.required:
                values[name] = None if field.default is MISSING else copy.deepcopy(field.default)
        if self.report.error_count != before:
            return None
        ctx = LoaderBuildContext(
            self.report, path, type_name=type_name, origin=origin, evidence_key=self.settings.evidence_key,
            base_dir=self.doc.base_dir, settings=self.build_settings(),
        )
        ctx.untrusted = self.untrusted
        assertion: Assertion = self.run_type_code(lambda: cls(test_id, index, values, ctx),
                                                  f"`{type_name}` could not be built:", path,
                                                  hint="this is a bug in the assertion type; please report it")
        if assertion is RAISED or ctx.errors:
            return None
        assertion.origin = origin
        assertion.position = self.doc.position(path)
        reason: Optional[str] = self.run_type_code(assertion.ineffective_reason,
                                                   f"`{type_name}` failed its effectiveness check:", path)
        if reason is RAISED:
            return None
        if reason:
            message = f"test `{test_id}` {where} (`{type_name}`) cannot fail: {reason}"
            hint = "make the check constrain something, or pass --allow-ineffective-assertions to keep it " \
                   "(it is then reported as a warning)"
            if self.allow_ineffective:
                self.report.warn(codes.E_ASSERT_INEFFECTIVE, message, path, hint=hint)
            else:
                self.report.error(codes.E_ASSERT_INEFFECTIVE, message, path, hint=hint)
                return None
        return assertion

    def run_type_code(self, run: Callable[[], Any], failed: str, path: KeyPath, *,
                      hint: Optional[str] = None) -> Any:
        """``run()``: a call into an assertion type's own code. When it raises, ``failed`` (what was being
        done) and the exception become one E_ASSERT_BUILD diagnostic and :data:`RAISED` is returned."""
        try:
            return run()
        except Exception as exc:  # noqa: BLE001 -- a type's own code must not crash the loader
            self.report.error(codes.E_ASSERT_BUILD, f"{failed} {type(exc).__name__}: {exc}", path, hint=hint)
            return RAISED

    def build_settings(self) -> Dict[str, Any]:
        # What an assertion may read about the file's settings while it is built.
        return {
            "embedder": self.embedder,
            "embedder_ref": self.settings.embedder,
            "max_match_chars": self.settings.regex_timeout_chars,
            "regex_timeout_chars": self.settings.regex_timeout_chars,
            "raw": dict(self.settings.raw),
        }

    def evaluate_unit(self, a: Assertion, test_id: str, test_path: KeyPath) -> Optional[Outcome]:
        outcome = self.run_type_code(a.evaluate_unit, f"test `{test_id}`: unit-test form `{a.type_name}` raised",
                                     test_path)
        if outcome is RAISED:
            return None
        if not isinstance(outcome, Outcome):
            self.report.error(codes.E_ASSERT_BUILD, f"test `{test_id}`: unit-test form `{a.type_name}` returned "
                              f"{type(outcome).__name__}, not an Outcome", test_path)
            return None
        return outcome
