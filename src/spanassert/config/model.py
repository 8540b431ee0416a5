"""The loaded, validated rules file. Built only by :func:`spanassert.config.load_config`."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from ..assertions.base import Assertion
from ..core.model import ConfigError, Diagnostic, Outcome, Severity
from .codes import E_UNIT_FORM_FAILED

MODE_ENFORCE = "enforce"
MODE_SHADOW = "shadow"
ACTION_ALERT = "alert"
ACTION_BLOCK = "block"


class EpisodeSettings:
    """``episodes:`` — how spans are grouped into episodes and how much memory they may hold."""

    __slots__ = ("key", "idle_timeout", "max_open", "max_calls_per_episode", "max_argument_bytes", "late_window")

    def __init__(
        self,
        *,
        key: str = "trace",
        idle_timeout: float = 300.0,
        max_open: int = 10_000,
        max_calls_per_episode: int = 10_000,
        max_argument_bytes: int = 65_536,
        late_window: int = 2_000,
    ) -> None:
        self.key = key  # "trace" or an attribute name such as gen_ai.conversation.id
        self.idle_timeout = idle_timeout  # seconds without a span before an open episode closes
        self.max_open = max_open  # open episodes; the oldest is evicted beyond this
        self.max_calls_per_episode = max_calls_per_episode  # calls counted beyond this are overflow
        self.max_argument_bytes = max_argument_bytes  # recorded argument/result text kept per call
        self.late_window = late_window  # recently closed episodes remembered for late spans

    @property
    def by_trace(self) -> bool:
        return self.key == "trace"


class Match:
    """``match:`` — which episodes a test applies to. Every given condition must hold."""

    __slots__ = ("agent", "service", "attributes")

    def __init__(
        self,
        *,
        agent: Optional[List[str]] = None,
        service: Optional[List[str]] = None,
        attributes: Optional[Dict[str, Any]] = None,
    ) -> None:
        self.agent = agent
        self.service = service
        self.attributes = attributes or {}

    def selects(self, agent: Optional[str], service: Optional[str], attributes: Mapping[str, Any]) -> bool:
        if self.agent is not None and agent not in self.agent:
            return False
        if self.service is not None and service not in self.service:
            return False
        for k, want in self.attributes.items():
            got = attributes.get(k)
            if got is None or (got != want and str(got) != str(want)):
                return False
        return True


class MappingRule:
    """``mappings:`` — a user-defined way to recognise tool (or agent/step) spans.

    ``when`` holds conditions on the span: ``{attribute: value}`` equality, and the special keys
    ``span_name`` (exact), ``span_name_prefix``, ``span_name_suffix``. The ``role`` says what a
    matching span is; the other keys name the attributes that carry the tool name, the arguments,
    the result and the agent name.
    """

    __slots__ = ("when", "role", "tool_name", "tool_name_from_span", "arguments", "result", "agent_name", "call_id")

    def __init__(
        self,
        *,
        when: Dict[str, Any],
        role: str = "tool",
        tool_name: Optional[str] = None,
        tool_name_from_span: bool = False,
        arguments: Optional[str] = None,
        result: Optional[str] = None,
        agent_name: Optional[str] = None,
        call_id: Optional[str] = None,
    ) -> None:
        self.when = when
        self.role = role  # "tool" | "agent" | "step"
        self.tool_name = tool_name
        self.tool_name_from_span = tool_name_from_span
        self.arguments = arguments
        self.result = result
        self.agent_name = agent_name
        self.call_id = call_id


class Settings:
    """``settings:`` — execution settings. Assay's keys are accepted; ours are below."""

    __slots__ = ("embedder", "evidence_key", "regex_timeout_chars", "raw", "guard_fail_open")

    def __init__(
        self,
        *,
        embedder: Optional[str] = None,
        evidence_key: Optional[bytes] = None,
        regex_timeout_chars: int = 100_000,
        raw: Optional[Dict[str, Any]] = None,
        guard_fail_open: bool = True,
    ) -> None:
        self.embedder = embedder  # "module:function" returning a vector for a text
        self.evidence_key = evidence_key  # key for hashed evidence (from settings.evidence_key_env)
        self.regex_timeout_chars = regex_timeout_chars  # text longer than this is cut before a rule regex
        self.raw = raw or {}
        # settings.guard.fail_open: a guard's internal error allows the call (True) or blocks it.
        self.guard_fail_open = guard_fail_open


class TestCase:
    """One entry of ``tests:``. ``assertions`` holds the ``expected:`` check (if any) first, then
    the ``assertions:`` entries, all built from the registries."""

    __test__ = False  # not a pytest test class

    __slots__ = (
        "id",
        "match",
        "severity",
        "mode",
        "action",
        "input",
        "tags",
        "metadata",
        "assertions",
        "unit_results",
        "line",
    )

    def __init__(
        self,
        *,
        id: str,
        match: Optional[Match] = None,
        severity: Severity = Severity.ERROR,
        mode: str = MODE_ENFORCE,
        action: str = ACTION_ALERT,
        input: Any = None,
        tags: Optional[List[str]] = None,
        metadata: Optional[Dict[str, Any]] = None,
        assertions: Optional[List[Assertion]] = None,
        line: Optional[int] = None,
    ) -> None:
        self.id = id
        self.match = match
        self.severity = severity
        self.mode = mode
        self.action = action  # "alert", or "block": a guard refuses a call that breaks this test
        self.input = input
        self.tags = tags or []
        self.metadata = metadata or {}
        self.assertions: List[Assertion] = assertions or []
        # (assertion, outcome) for unit-test forms, evaluated at load.
        self.unit_results: List[tuple[Assertion, Outcome]] = []
        self.line = line

    @property
    def shadow(self) -> bool:
        return self.mode == MODE_SHADOW

    @property
    def blocks(self) -> bool:
        """A guard refuses calls that break this test (``action: block`` in enforce mode)."""
        return self.action == ACTION_BLOCK and self.mode != MODE_SHADOW

    @property
    def trace_assertions(self) -> List[Assertion]:
        return [a for a in self.assertions if a.scope == "trace"]


class Config:
    """A validated rules file."""

    __slots__ = ("version", "suite", "model", "settings", "episodes", "mappings", "tests", "source", "diagnostics")

    def __init__(
        self,
        *,
        version: int = 1,
        suite: Optional[str] = None,
        model: Optional[str] = None,
        settings: Optional[Settings] = None,
        episodes: Optional[EpisodeSettings] = None,
        mappings: Optional[List[MappingRule]] = None,
        tests: Optional[List[TestCase]] = None,
        source: Optional[str] = None,
        diagnostics: Optional[List[Diagnostic]] = None,
    ) -> None:
        self.version = version
        self.suite = suite
        self.model = model
        self.settings = settings or Settings()
        self.episodes = episodes or EpisodeSettings()
        self.mappings = mappings or []
        self.tests = tests or []
        self.source = source
        # Warnings (and, with allow_ineffective_assertions, the refused-ineffective notes).
        self.diagnostics = diagnostics or []

    @property
    def unit_failures(self) -> List[tuple[TestCase, Assertion, Outcome]]:
        out = []
        for t in self.tests:
            for a, o in t.unit_results:
                if o.verdict.value != "passed":
                    out.append((t, a, o))
        return out


def unit_result_line(file: Optional[str], test_id: str, assertion: Assertion, outcome: Outcome) -> str:
    """How ``validate`` (and every door that refuses the file) words one unit-test form's result."""
    mark = "✓" if outcome.verdict.value == "passed" else "✗"
    line = f"{mark} {file or '<config>'}: test `{test_id}` {assertion.type_name} #{assertion.index}: " \
           f"{outcome.verdict.value}"
    return line + (f" — {outcome.message}" if outcome.message else "")


class UnitFormFailure(ConfigError):
    """The rules file's own unit-test forms (``args_valid`` / ``sequence_valid`` / ``tool_blocklist``
    with test data) contradict their ``expect``: the file is wrong, so no door runs it. ``lines`` are
    ``validate``'s words for each failed form."""

    def __init__(self, config: Config) -> None:
        self.lines: List[str] = []
        diagnostics: List[Diagnostic] = []
        for t, a, o in config.unit_failures:
            self.lines.append(unit_result_line(config.source, t.id, a, o))
            line, column = a.position or (t.line, None)
            diagnostics.append(Diagnostic(
                E_UNIT_FORM_FAILED,
                f"test `{t.id}` {a.type_name} #{a.index}: unit-test form {o.verdict.value}"
                + (f" — {o.message}" if o.message else ""),
                file=config.source, line=line, column=column,
                hint="the file's own test data contradicts its `expect`: fix the data, the policy or `expect` "
                     f"(`spanassert validate {config.source or 'RULES'}` runs these forms alone)",
            ))
        super().__init__(diagnostics)


def require_runnable(config: Config) -> None:
    """The one check every door (replay, serve, the processor, ``check()``, the pytest marker) makes
    before running a rules file: raise :class:`UnitFormFailure` (a :class:`ConfigError`) when one of
    its unit-test forms failed. ``validate`` reports those forms instead of refusing."""
    if config.unit_failures:
        raise UnitFormFailure(config)
