"""The loaded, validated rules file. Built only by :func:`spanassert.config.load_config`."""
from __future__ import annotations

from dataclasses import field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..assertions.base import Assertion
from ..core.model import ConfigError, Diagnostic, Outcome, Severity
from ..core.records import record
from .codes import E_UNIT_FORM_FAILED

MODE_ENFORCE = "enforce"
MODE_SHADOW = "shadow"
ACTION_ALERT = "alert"
ACTION_BLOCK = "block"


@record
class EpisodeSettings:
    """``episodes:`` — how spans are grouped into episodes and how much memory they may hold."""

    key: str = "trace"  # "trace" or an attribute name such as gen_ai.conversation.id
    idle_timeout: float = 300.0  # seconds without a span before an open episode closes
    max_open: int = 10_000  # open episodes; the oldest is evicted beyond this
    max_calls_per_episode: int = 10_000  # calls counted beyond this are overflow
    max_argument_bytes: int = 65_536  # recorded argument/result text kept per call
    late_window: int = 2_000  # recently closed episodes remembered for late spans

    @property
    def by_trace(self) -> bool:
        return self.key == "trace"


@record
class Match:
    """``match:`` — which episodes a test applies to. Every given condition must hold."""

    agent: Optional[List[str]] = None
    service: Optional[List[str]] = None
    attributes: Dict[str, Any] = field(default_factory=dict)

    def decides(self, agent: Optional[str], service: Optional[str], attributes: Mapping[str, Any],
                agent_read: bool = True, service_read: bool = True) -> Optional[bool]:
        """Whether this match selects the episode; None when it cannot be decided: a condition on the
        agent (or service) whose name the span records as a value that is not text (``agent_read``,
        ``service_read`` False), and no other condition rules the episode out."""
        undecided = False
        if self.agent is not None:
            if not agent_read:
                undecided = True
            elif agent not in self.agent:
                return False
        if self.service is not None:
            if not service_read:
                undecided = True
            elif service not in self.service:
                return False
        if not self._attributes_hold(attributes):
            return False
        return None if undecided else True

    def selects(self, agent: Optional[str], service: Optional[str], attributes: Mapping[str, Any]) -> bool:
        if self.agent is not None and agent not in self.agent:
            return False
        if self.service is not None and service not in self.service:
            return False
        return self._attributes_hold(attributes)

    def _attributes_hold(self, attributes: Mapping[str, Any]) -> bool:
        for k, want in self.attributes.items():
            got = attributes.get(k)
            if got is None or (got != want and str(got) != str(want)):
                return False
        return True


@record
class MappingRule:
    """``mappings:`` — a user-defined way to recognise tool (or agent/step) spans.

    ``when`` holds conditions on the span: ``{attribute: value}`` equality, and the special keys
    ``span_name`` (exact), ``span_name_prefix``, ``span_name_suffix``. The ``role`` says what a
    matching span is; the other keys name the attributes that carry the tool name, the arguments,
    the result and the agent name.
    """

    when: Dict[str, Any]
    role: str = "tool"  # "tool" | "agent" | "step"
    tool_name: Optional[str] = None
    tool_name_from_span: bool = False
    arguments: Optional[str] = None
    result: Optional[str] = None
    agent_name: Optional[str] = None
    call_id: Optional[str] = None


@record
class Settings:
    """``settings:`` — execution settings. Assay's keys are accepted; ours are below."""

    embedder: Optional[str] = None  # "module:function" returning a vector for a text
    evidence_key: Optional[bytes] = None  # key for hashed evidence (from settings.evidence_key_env)
    regex_timeout_chars: int = 100_000  # text longer than this is cut before a rule regex
    raw: Dict[str, Any] = field(default_factory=dict)
    # settings.guard.fail_open: a guard's internal error allows the call (True) or blocks it.
    guard_fail_open: bool = True


@record
class TestCase:
    """One entry of ``tests:``. ``assertions`` holds the ``expected:`` check (if any) first, then
    the ``assertions:`` entries, all built from the registries."""

    __test__ = False  # not a pytest test class

    id: str
    match: Optional[Match] = None
    severity: Severity = Severity.ERROR
    mode: str = MODE_ENFORCE
    action: str = ACTION_ALERT  # "alert", or "block": a guard refuses a call that breaks this test
    input: Any = None
    tags: List[str] = field(default_factory=list)
    metadata: Dict[str, Any] = field(default_factory=dict)
    assertions: List[Assertion] = field(default_factory=list)
    # (assertion, outcome) for unit-test forms, evaluated at load.
    unit_results: List[Tuple[Assertion, Outcome]] = field(default_factory=list, init=False)
    line: Optional[int] = None

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


@record
class Config:
    """A validated rules file."""

    version: int = 1
    suite: Optional[str] = None
    model: Optional[str] = None
    settings: Settings = field(default_factory=Settings)
    episodes: EpisodeSettings = field(default_factory=EpisodeSettings)
    mappings: List[MappingRule] = field(default_factory=list)
    tests: List[TestCase] = field(default_factory=list)
    source: Optional[str] = None
    # Warnings (and, with allow_ineffective_assertions, the refused-ineffective notes).
    diagnostics: List[Diagnostic] = field(default_factory=list)

    @property
    def unit_failures(self) -> List[Tuple[TestCase, Assertion, Outcome]]:
        return [(t, a, o) for t in self.tests for a, o in t.unit_results if o.verdict.value != "passed"]


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
