"""``load_config``: a strict reading of a rules file that reports every problem at once.

Order of work: read (size, encoding) -> compose YAML with positions (duplicates, aliases, depth) ->
walk the structure against the tables in :mod:`.schema` -> build each assertion through its
registry class -> refuse checks that cannot fail -> run unit-test forms. Every problem becomes a
:class:`~spanassert.core.model.Diagnostic` with file, line, column, key path and a fix; nothing raises
past this module except :class:`~spanassert.core.model.ConfigError`.

This module walks the file's sections; :mod:`.build` builds each check, :mod:`.reporter` collects
the diagnostics, :mod:`.source` reads and composes the YAML.
"""
from __future__ import annotations

import importlib
import operator
import os
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, TextIO, Tuple

from ..assertions.base import Assertion, Field
from ..assertions.registry import ASSERTION_TYPES
from ..core.durations import parse_duration
from ..core.model import ConfigError, Diagnostic, Outcome, Severity
from . import codes
from .build import ORIGIN_ASSERTIONS, AssertionBuilder, LoaderBuildContext
from .fields import (
    MISSING_KEY,
    UNKNOWN_KEY,
    field_problems,
    field_validator,
    kind_of,
    short,
    value_problem,
)
from .model import Config, EpisodeSettings, MappingRule, Match, Settings, TestCase, UnitFormFailure, require_runnable
from .reporter import Reporter, internal_error, ordered
from .schema import (
    ACTIONS,
    EPISODE_FIELDS,
    EXTENSION_PREFIXES,
    GUARD_FIELDS,
    MAPPING_FIELDS,
    MATCH_FIELDS,
    MAX_TEST_ID,
    SETTINGS_FIELDS,
    TEST_FIELDS,
    TOP_FIELDS,
    has_ref,
)
from .source import Document, KeyPath, SourceProblem, format_path, parse_document, read_source


def _can_fail_at_start(a: Assertion) -> bool:
    """Whether a check may fail as a call starts (what a guard can block on): it reads call starts
    or model steps (a step cap fails at the call that goes over)."""
    return a.scope == "trace" and (type(a).on_call_start is not Assertion.on_call_start or a.wants_steps)


def load_config(path_or_text: Any, *, allow_ineffective_assertions: bool = False,
                untrusted: bool = False) -> Config:
    """Load and validate a rules file (a path, or YAML text containing a newline).

    Raises :class:`ConfigError` listing every problem found. Warnings (and, with
    ``allow_ineffective_assertions``, the checks that cannot fail) are kept in
    ``Config.diagnostics``.

    A rules file is code: ``settings.embedder`` names a Python function that is imported, and
    policy files are read from disk. ``untrusted=True`` loads a file nobody vouches for (e.g. one
    from a pull request) without importing or reading anything beyond it: ``settings.embedder`` is
    refused (``E_CFG_UNTRUSTED``) instead of imported, and so is a policy file outside the rules
    file's folder (an absolute path, ``..``, or a symbolic link leading out). Schema ``$ref``s never
    fetch anything, trusted or not. See SECURITY.md.
    """
    from .. import assertions  # noqa: F401 - importing the package registers every assertion type

    try:
        source = read_source(path_or_text)
        document = parse_document(source)
    except SourceProblem as problem:
        raise ConfigError(problem.diagnostics) from None
    except Exception as exc:  # noqa: BLE001 - a reader bug must still come out as a diagnostic
        raise ConfigError([internal_error(exc, None)]) from None

    loader = _Loader(document, allow_ineffective_assertions=allow_ineffective_assertions, untrusted=untrusted)
    config: Optional[Config]
    try:
        config = loader.load()
    except Exception as exc:  # noqa: BLE001 - never a traceback for a rules file
        loader.report.diagnostics.append(internal_error(exc, document.file))
        config = None
    diagnostics = ordered(loader.report.diagnostics)
    if config is None or any(d.severity == "error" for d in diagnostics):
        raise ConfigError(diagnostics or [Diagnostic(codes.E_INTERNAL, "rules file refused", file=document.file)])
    config.diagnostics = diagnostics
    return config


# -- the walk ---------------------------------------------------------------------------------------
class _Loader(AssertionBuilder):
    def __init__(self, document: Document, *, allow_ineffective_assertions: bool, untrusted: bool = False) -> None:
        self.doc = document
        self.report = Reporter(document)
        self.allow_ineffective = allow_ineffective_assertions
        self.untrusted = untrusted
        self.settings = Settings()
        self.embedder: Optional[Callable[..., Any]] = None

    # generic mapping check: type, unknown keys (did-you-mean), required keys, leaf values
    def check_mapping(self, value: Any, path: KeyPath, fields: Mapping[str, Field], what: str, *,
                      extension_keys: bool = False, ignored: Iterable[str] = ()) -> Optional[Dict[str, Any]]:
        if not isinstance(value, dict):
            self.report.error(codes.E_CFG_TYPE, f"{what} must be a mapping, not {kind_of(value)}", path,
                              hint="write `key: value` lines under it (or `{key: value}`); allowed keys: "
                                   + ", ".join(sorted(fields)))
            return None
        ignored_set = set(ignored)
        for p in field_problems(
                value, fields,
                known=lambda key: key in ignored_set or (extension_keys and key.startswith(EXTENSION_PREFIXES)),
                walked_apart=lambda field: has_ref(field.schema),  # a nested structure, walked by its own method
                label=lambda name: format_path((*path, name))):
            if p.kind == UNKNOWN_KEY:
                self.unknown_key(p.key, path, fields, what)
            elif p.kind == MISSING_KEY and p.field is not None:
                self.report.error(codes.E_CFG_REQUIRED, f"{what} is missing the required key `{p.key}`", path,
                                  hint=f"add `{p.key}:`" + (f" ({p.field.doc})" if p.field.doc else ""))
            elif p.problem is not None:
                self.value_error(p.problem, (*path, p.key))
        return value

    # -- top level ----------------------------------------------------------------------------------
    def load(self) -> Optional[Config]:
        root = self.doc.value
        if root is None:
            self.report.error(codes.E_CFG_EMPTY, "the rules file is empty", (),
                              hint="start with `version: 1` and a `tests:` list")
            return None
        if not isinstance(root, dict):
            self.report.error(codes.E_CFG_TYPE, f"a rules file must be a mapping, not {kind_of(root)}", (),
                              hint="start with `version: 1` and a `tests:` list")
            return None
        for key in root:
            if key == "policies":
                self.report.error(
                    codes.E_CFG_LEGACY_POLICIES,
                    "top-level `policies:` is the Assay v0 format and is not read by version 1",
                    ("policies",), at_key=True,
                    hint="move each policy into the `assertions:` list of the test it belongs to",
                )
        # `version` is checked on its own (it has its own code and messages); `policies` is reported above.
        special = ("policies", "version", "configVersion")
        rest = {k: v for k, v in root.items() if k not in special}
        self.check_mapping(rest, (), TOP_FIELDS, "the rules file", extension_keys=True)
        version = self.version(root)
        self.settings = self.load_settings(root.get("settings"))
        episodes = self.load_episodes(root.get("episodes"))
        mappings = self.load_mappings(root.get("mappings"))
        tests = self.load_tests(root.get("tests"), present="tests" in root)
        suite = root.get("suite") if isinstance(root.get("suite"), str) else None
        model = root.get("model") if isinstance(root.get("model"), str) else None
        return Config(version=version, suite=suite, model=model, settings=self.settings, episodes=episodes,
                      mappings=mappings, tests=tests, source=self.doc.file)

    def version(self, root: Dict[str, Any]) -> int:
        present = [k for k in ("version", "configVersion") if k in root]
        migrate = f"`spanassert migrate {self.doc.file or 'FILE'}`"
        if not present:
            self.report.error(codes.E_CFG_VERSION, "the rules file has no `version` (a file without one is Assay's "
                              "legacy v0 format)", (),
                              hint=f"add `version: 1` at the top of the file, or run {migrate} to convert an Assay "
                                   "v0 file (it inlines `$ref` and policy files and writes `version: 1`)")
            return 1
        if len(present) == 2:
            self.report.error(codes.E_CFG_VERSION, "both `version` and `configVersion` are given",
                              ("configVersion",), at_key=True, hint="keep only `version: 1`")
        key = present[0]
        value = root[key]
        if value == 1 and isinstance(value, int) and not isinstance(value, bool):
            return 1
        if value == 0 and isinstance(value, int) and not isinstance(value, bool):
            self.report.error(codes.E_CFG_VERSION,
                              f"`{key}: 0` is Assay's legacy format, which spanassert does not read", (key,),
                              hint=f"run {migrate} to convert it to version 1 (it inlines `$ref` and policy "
                                   "files and writes `version: 1`)")
        else:
            self.report.error(codes.E_CFG_VERSION, f"`{key}` must be 1; got {short(value)}", (key,),
                              hint="set `version: 1` (an unquoted integer)")
        return 1

    # -- settings ----------------------------------------------------------------------------------
    def load_settings(self, raw: Any) -> Settings:
        if raw is None:
            return Settings()
        path: KeyPath = ("settings",)
        value = self.check_mapping(raw, path, SETTINGS_FIELDS, "`settings`", extension_keys=True)
        if value is None:
            return Settings()
        embedder_ref = value.get("embedder") if isinstance(value.get("embedder"), str) else None
        if embedder_ref and self.untrusted:
            self.report.error(
                codes.E_CFG_UNTRUSTED,
                f"`settings.embedder: {short(embedder_ref)}` names Python code to import, which an untrusted "
                "rules file may not do (importing a module runs it)", (*path, "embedder"),
                hint="load the file as trusted only if you trust its author (see SECURITY.md), or drop "
                     "the embedder and the `semantic_similarity_to` checks that need it",
            )
            embedder_ref = None
        elif embedder_ref and _is_valid(SETTINGS_FIELDS["embedder"], embedder_ref):
            self.embedder = self.import_embedder(embedder_ref, (*path, "embedder"))
        evidence_key: Optional[bytes] = None
        env_name = value.get("evidence_key_env")
        if isinstance(env_name, str) and _is_valid(SETTINGS_FIELDS["evidence_key_env"], env_name):
            secret = os.environ.get(env_name)
            if secret:
                evidence_key = secret.encode("utf-8", "surrogateescape")
            else:
                self.report.warn(
                    codes.W_CFG_EVIDENCE_KEY_UNSET,
                    f"environment variable `{env_name}` is not set; evidence is shown as <redacted>, not hashed",
                    (*path, "evidence_key_env"), hint=f"set {env_name} to the key for hashed evidence",
                )
        max_chars = value.get("max_match_chars")
        settings = Settings(embedder=embedder_ref, evidence_key=evidence_key, raw=dict(value))
        if "guard" in value:
            guard = self.check_mapping(value["guard"], (*path, "guard"), GUARD_FIELDS, "`settings.guard`")
            if guard is not None and isinstance(guard.get("fail_open"), bool):
                settings.guard_fail_open = guard["fail_open"]
        if isinstance(max_chars, int) and not isinstance(max_chars, bool) and max_chars > 0:
            settings.regex_timeout_chars = max_chars
        return settings

    def import_embedder(self, ref: str, path: KeyPath) -> Optional[Callable[..., Any]]:
        module_name, _, attr = ref.partition(":")
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # noqa: BLE001 - importing user code may raise anything
            self.report.error(codes.E_CFG_EMBEDDER, f"cannot import embedder module `{module_name}`: "
                              f"{type(exc).__name__}: {exc}", path,
                              hint="make the module importable (install it or add its directory to PYTHONPATH)")
            return None
        try:
            fn = operator.attrgetter(attr)(module)
        except AttributeError:
            self.report.error(codes.E_CFG_EMBEDDER, f"module `{module_name}` has no `{attr}`", path,
                              hint="write `module:function` naming a function that returns a vector for a text")
            return None
        if not callable(fn):
            self.report.error(codes.E_CFG_EMBEDDER, f"embedder `{ref}` is not callable", path,
                              hint="name a function that takes a text and returns a list of floats")
            return None
        return fn  # type: ignore[no-any-return]  # a user's callable, checked by calling it

    # -- episodes ---------------------------------------------------------------------------------
    def load_episodes(self, raw: Any) -> EpisodeSettings:
        if raw is None:
            return EpisodeSettings()
        path: KeyPath = ("episodes",)
        value = self.check_mapping(raw, path, EPISODE_FIELDS, "`episodes`")
        if value is None:
            return EpisodeSettings()
        kwargs: Dict[str, Any] = {}
        if isinstance(value.get("key"), str) and value["key"]:
            kwargs["key"] = value["key"]
        if "idle_timeout" in value:
            try:
                seconds: Optional[float] = parse_duration(value["idle_timeout"])
            except ValueError:
                seconds = None  # the schema check reported it
            if seconds is not None and seconds > 0:
                kwargs["idle_timeout"] = seconds
            elif seconds is not None:
                self.report.error(codes.E_CFG_VALUE, "`episodes.idle_timeout` must be greater than 0",
                                  (*path, "idle_timeout"), hint="give a duration such as `30s` or `5m`")
        for name in ("max_open", "max_calls_per_episode", "max_argument_bytes", "late_window"):
            v = value.get(name)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                kwargs[name] = v
        return EpisodeSettings(**kwargs)

    # -- mappings ---------------------------------------------------------------------------------
    def load_mappings(self, raw: Any) -> List[MappingRule]:
        if raw is None:
            return []
        path: KeyPath = ("mappings",)
        if not isinstance(raw, list):
            self.report.error(codes.E_CFG_TYPE, f"`mappings` must be a list, not {kind_of(raw)}", path,
                              hint="write one `- ...` entry per mapping rule under `mappings:`")
            return []
        rules: List[MappingRule] = []
        for i, item in enumerate(raw):
            ipath = (*path, i)
            before = self.report.error_count
            value = self.check_mapping(item, ipath, MAPPING_FIELDS, f"mapping #{i}")
            if value is None:
                continue
            role = value.get("role", "tool")
            if role == "tool" and not value.get("tool_name") and value.get("tool_name_from_span") is not True:
                self.report.error(codes.E_CFG_REQUIRED, f"mapping #{i} has role `tool` but does not say where the "
                                  "tool name comes from", ipath,
                                  hint="add `tool_name: <attribute>` or `tool_name_from_span: true`")
            if self.report.error_count != before:
                continue
            rules.append(MappingRule(
                when=dict(value["when"]), role=role, tool_name=value.get("tool_name"),
                tool_name_from_span=bool(value.get("tool_name_from_span", False)),
                arguments=value.get("arguments"), result=value.get("result"),
                agent_name=value.get("agent_name"), call_id=value.get("call_id"),
            ))
        return rules

    # -- tests ------------------------------------------------------------------------------------
    def load_tests(self, raw: Any, present: bool = False) -> List[TestCase]:
        path: KeyPath = ("tests",)
        if raw is None and present:  # `tests:` with no value: as empty as `tests: []` (Assay refuses both)
            self.report.error(codes.E_CFG_VALUE, "`tests` has no value; the rules file checks nothing", path,
                              hint="add at least one test under `tests:` with `id:` and `assertions:`")
            return []
        if raw is None:
            return []  # reported as a missing required key
        if not isinstance(raw, list):
            self.report.error(codes.E_CFG_TYPE, f"`tests` must be a list, not {kind_of(raw)}", path,
                              hint="write `tests:` followed by `- id: ...` entries")
            return []
        if not raw:
            self.report.error(codes.E_CFG_VALUE, "`tests` is empty; the rules file checks nothing", path,
                              hint="add at least one test with `id:` and `assertions:`")
            return []
        tests: List[TestCase] = []
        first_seen: Dict[str, int] = {}
        for i, item in enumerate(raw):
            test = self.load_test(item, (*path, i), i)
            if test is None:
                continue
            if test.id in first_seen:
                self.report.error(codes.E_CFG_DUPLICATE_ID,
                                  f"test id `{test.id}` is already used by the test at line {first_seen[test.id]}",
                                  (*path, i, "id"), hint="give every test a unique `id`")
                continue
            first_seen[test.id] = test.line or 0
            tests.append(test)
        return tests

    def load_test(self, raw: Any, path: KeyPath, index: int) -> Optional[TestCase]:
        value = self.check_mapping(raw, path, TEST_FIELDS, f"test #{index}")
        if value is None:
            return None
        test_id = value.get("id")
        if not isinstance(test_id, str) or not test_id or len(test_id) > MAX_TEST_ID:
            return None  # reported by check_mapping
        match = self.load_match(value.get("match"), (*path, "match")) if "match" in value else None
        # A mapping or list given as the severity is reported by check_mapping; it must not reach the
        # enum's lookup table (unhashable: an internal error in place of that diagnostic).
        raw_severity = value.get("severity")
        severity = Severity(raw_severity) if isinstance(raw_severity, str) \
            and raw_severity in Severity._value2member_map_ else Severity.ERROR
        checks: List[Assertion] = []
        unit_results: List[Tuple[Assertion, Outcome]] = []
        if "expected" in value:
            a = self.load_expected(test_id, value["expected"], (*path, "expected"))
            if a is not None:
                checks.append(a)
        entries = value.get("assertions")
        if "assertions" in value and not isinstance(entries, list):
            self.report.error(codes.E_CFG_TYPE, f"`assertions` must be a list, not {kind_of(entries)}",
                              (*path, "assertions"), hint="write each assertion as a `- type: ...` list item")
        elif isinstance(entries, list):
            # A check's index is its position among the test's checks: the `expected:` check is #0 and
            # the `assertions:` entries follow it, so each check has its own result and coverage row.
            first = 1 if "expected" in value else 0
            for j, entry in enumerate(entries):
                a = self.build(test_id, entry, (*path, "assertions", j), first + j, ORIGIN_ASSERTIONS,
                               ASSERTION_TYPES, "assertion")
                if a is not None:
                    checks.append(a)
        if "expected" not in value and not entries:
            self.report.warn(codes.W_CFG_VACUOUS_EXPECTED,
                             f"test `{test_id}` checks nothing: it has no `expected:` and no `assertions:`, "
                             "so it passes for any episode", path,
                             hint="add `assertions:` (or an `expected:` check), or remove the test")
        if value.get("action") == "block" and checks and not any(_can_fail_at_start(a) for a in checks):
            self.report.warn(
                codes.W_CFG_BLOCK_NEVER,
                f"test `{test_id}` has `action: block`, but none of its checks ("
                + ", ".join(sorted({a.type_name for a in checks})) + ") can fail before a call runs: "
                "it can only alert", (*path, "action"),
                hint="block with checks decided as a call starts (a forbidden tool, a count, an order rule, "
                     "arguments), or drop `action: block`")
        for a in checks:
            if a.scope == "unit":
                outcome = self.evaluate_unit(a, test_id, path)
                if outcome is not None:
                    unit_results.append((a, outcome))
        line, _ = self.doc.position(path)
        test = TestCase(
            id=test_id, match=match, severity=severity, mode=value.get("mode", "enforce")
            if value.get("mode") in ("enforce", "shadow") else "enforce",
            action=value["action"] if value.get("action") in ACTIONS else "alert",
            input=value.get("input"), tags=list(value.get("tags") or []) if isinstance(value.get("tags"), list) else [],
            metadata=dict(value["metadata"]) if isinstance(value.get("metadata"), dict) else {},
            assertions=checks, line=line,
        )
        test.unit_results = unit_results
        return test

    def load_match(self, raw: Any, path: KeyPath) -> Optional[Match]:
        value = self.check_mapping(raw, path, MATCH_FIELDS, "`match`")
        if value is None:
            return None

        def names(v: Any) -> Optional[List[str]]:
            if isinstance(v, str):
                return [v]
            if isinstance(v, list) and all(isinstance(x, str) for x in v):
                return list(v)
            return None

        attrs = value.get("attributes")
        return Match(agent=names(value.get("agent")), service=names(value.get("service")),
                     attributes=dict(attrs) if isinstance(attrs, dict) else {})

def load_to_run(path: str, prog: str, err: TextIO) -> Tuple[Optional[Config], int]:
    """The rules file a long-running command judges by (``serve``, ``mcp-proxy``): loaded and
    checked as every door checks it (:func:`require_runnable`), with exit code 0. Or None and the
    exit code after writing why the command is not started, in one wording for every such command:
    each problem on its own line, then one ``prog: path: ...`` line saying how to fix it. Exit 1
    when the file's own unit-test forms failed (in ``validate``'s words), 2 when it is invalid or
    cannot be read."""
    try:
        config = load_config(path)
        require_runnable(config)
    except UnitFormFailure as exc:
        for line in exc.lines:
            err.write(line + "\n")
        err.write(f"{prog}: {path}: {len(exc.lines)} unit-test form(s) of the rules file failed "
                  f"(listed above), not started; fix them (`spanassert validate {path}` runs them alone)\n")
        return None, 1
    except ConfigError as exc:
        for d in exc.diagnostics:
            err.write(d.format() + "\n")
        err.write(f"{prog}: {path}: invalid rules file (problems listed above), not started; "
                  f"`spanassert validate {path}` checks it alone\n")
        return None, 2
    except OSError as exc:
        err.write(f"{prog}: cannot read the rules file {path}: {exc}\n")
        return None, 2
    return config, 0


def _is_valid(field: Field, value: Any) -> bool:
    return not list(field_validator(field.schema).iter_errors(value))


# value_problem: from .fields
__all__ = ["load_config", "load_to_run", "LoaderBuildContext", "Reporter", "value_problem"]
