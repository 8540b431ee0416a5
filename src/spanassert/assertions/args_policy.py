"""Assay's structured (v2) ``args_valid`` policy: allow/deny tool patterns, per-tool JSON Schemas and
what to do with a tool that has none.

Read from Assay's source for the facts (crates/assay-core/src/model/validation.rs:
``validate_args_policy_value`` and ``has_structured_args_policy_shape``; crates/assay-metrics/src/
args_valid_next/{policy,evaluator}.rs; crates/assay-common/src/tool_pattern.rs), as Assay judges it:

- a policy is structured when it has a string ``version`` or ``name``, a list ``allow`` or ``deny``,
  ``tools`` with one of its policy keys, ``enforcement.unconstrained_tools``, or one of the keys
  Assay enforces elsewhere (``constraints``, ``limits``, ...); otherwise it is a ``{tool: schema}`` map;
- each call, in order: a name matching a ``deny`` pattern fails (E_TOOL_DENIED); with an ``allow``
  list, a name matching none of it fails (E_TOOL_NOT_ALLOWED); a tool without a schema fails only
  under ``enforcement.unconstrained_tools: deny`` (E_TOOL_UNCONSTRAINED), else it is not checked;
  a tool with a schema has its arguments validated (E_ARG_SCHEMA);
- ``allow``/``deny`` at the top level and under ``tools:`` are merged; ``schemas.$defs`` is shared by
  every tool's schema;
- patterns: ``*`` (every tool), ``read_*`` (prefix), ``*_file`` (suffix), ``*search*`` (substring);
  any other ``*`` is a literal asterisk.

Refused at load as Assay refuses them: a non-string ``version``; ``schemas`` alone (ambiguous with a
tool named ``schemas``); the keys this check does not enforce (``constraints``, ``limits``,
``signatures``, ``tool_pins``, ``discovery``, ``runtime_monitor``, ``kill_switch``, ``tools.*`` other
than allow/deny); a policy that enforces nothing (``allow: ["*"]`` alone).
"""
from __future__ import annotations

from typing import Any, Dict, Final, List, Mapping, Optional

from .base import BuildContext

E_CFG_POLICY: Final = "E_CFG_POLICY"
E_CFG_VACUOUS: Final = "E_CFG_VACUOUS"
W_CFG_NO_EFFECT: Final = "W_CFG_NO_EFFECT"

NOT_ENFORCED = ("constraints", "limits", "signatures", "tool_pins", "discovery", "runtime_monitor", "kill_switch")
_TOOLS_KEYS = ("allow", "deny", "allow_classes", "deny_classes", "approval_required", "approval_required_classes",
               "restrict_scope", "restrict_scope_classes", "restrict_scope_contract", "redact_args",
               "redact_args_classes", "redact_args_contract")
# Keys of a structured policy this check reads (or knows it may ignore: `name` is a label).
_READ: Final = frozenset({"version", "name", "allow", "deny", "tools", "schemas", "enforcement"})
UNCONSTRAINED_MODES: Final = ("warn", "deny", "allow")


def is_structured(policy: Any) -> bool:
    """Assay's test for a structured policy (rather than a ``{tool: schema}`` map)."""
    if not isinstance(policy, dict):
        return False
    tools = policy.get("tools")
    enforcement = policy.get("enforcement")
    return (isinstance(policy.get("version"), str) or isinstance(policy.get("name"), str)
            or isinstance(policy.get("allow"), list) or isinstance(policy.get("deny"), list)
            or (isinstance(tools, dict) and any(k in tools for k in _TOOLS_KEYS))
            or (isinstance(enforcement, dict) and "unconstrained_tools" in enforcement)
            or any(k in policy for k in NOT_ENFORCED))


def matches_tool_pattern(name: str, pattern: str) -> bool:
    """Assay's tool pattern: ``*``, ``prefix*``, ``*suffix``, ``*inner*``, or the exact name; a ``*``
    elsewhere is a literal character."""
    if "*" not in pattern:
        return name == pattern
    starts, ends = pattern.startswith("*"), pattern.endswith("*")
    if starts and ends:
        inner = pattern.strip("*")
        return not inner or inner in name
    if ends:
        prefix = pattern.rstrip("*")
        return bool(prefix) and name.startswith(prefix)
    if starts:
        suffix = pattern.lstrip("*")
        return bool(suffix) and name.endswith(suffix)
    return name == pattern


class ToolPolicy:
    """A structured policy, read: the patterns, the per-tool schemas (``$defs`` apart) and the mode."""

    __slots__ = ("allow", "deny", "schemas", "shared_defs", "unconstrained")

    def __init__(self) -> None:
        self.allow: List[str] = []
        self.deny: List[str] = []
        self.schemas: Dict[str, Any] = {}
        self.shared_defs: Optional[Mapping[str, Any]] = None
        self.unconstrained = "warn"

    @property
    def judges_names(self) -> bool:
        """Whether a call of a tool without a schema can fail (so every call must be seen)."""
        return bool(self.allow or self.deny) or self.unconstrained == "deny"

    def name_problem(self, name: str, has_schema: bool) -> Optional[str]:
        """Why a call of ``name`` breaks the policy on its name alone (Assay's order), or None."""
        for p in self.deny:
            if matches_tool_pattern(name, p):
                return f"E_TOOL_DENIED: the tool is denied (pattern `{p}`)"
        if self.allow and not any(matches_tool_pattern(name, p) for p in self.allow):
            return "E_TOOL_NOT_ALLOWED: the tool matches no `allow` pattern"
        if not has_schema and self.unconstrained == "deny":
            return "E_TOOL_UNCONSTRAINED: the tool has no schema (enforcement.unconstrained_tools: deny)"
        return None


_ABSENT: Final = object()


def _strings(value: Any, what: str, ctx: BuildContext, field: str) -> Optional[List[str]]:
    if value is _ABSENT:
        return []
    if not isinstance(value, list):
        ctx.error(E_CFG_POLICY, f"args_valid policy `{what}` must be a list", field=field,
                  hint=f"write it as a list of tool-name patterns, e.g. `{what}: [\"refund_*\"]`")
        return None
    if not all(isinstance(v, str) for v in value):
        ctx.error(E_CFG_POLICY, f"args_valid policy `{what}` entries must be strings", field=field,
                  hint="quote each tool-name pattern, e.g. `\"lookup_*\"`")
        return None
    return list(value)


def read_structured(policy: Dict[str, Any], ctx: BuildContext, field: str, where: str) -> Optional[ToolPolicy]:
    """Validate a structured policy as Assay does (errors reported at ``field``); None when refused.
    ``where`` names the policy in messages (a file name, or "inline")."""
    before = len(ctx.errors)
    out = ToolPolicy()
    if "version" in policy and not isinstance(policy["version"], str):
        ctx.error(E_CFG_POLICY, f"{where}: `version` must be a string such as \"2.0\" (a tool named `version` goes "
                  "under `schemas`)", field=field, hint="quote the version, e.g. `version: \"2.0\"`")
    unenforced = [k for k in NOT_ENFORCED if k in policy]
    tools = policy.get("tools")
    if tools is not None and not isinstance(tools, dict):
        ctx.error(E_CFG_POLICY, f"{where}: `tools` must be a mapping", field=field,
                  hint="write `tools: {allow: [...], deny: [...]}`")
        tools = None
    if isinstance(tools, dict):
        unenforced += sorted(f"tools.{k}" for k in tools if k not in ("allow", "deny"))
    if unenforced:
        ctx.error(E_CFG_POLICY, f"{where}: args_valid policy fields are not enforced by this check: "
                  f"{', '.join(unenforced)}", field=field,
                  hint="Assay refuses them in args_valid too (its MCP proxy enforces them); remove them, or keep "
                       "this policy for the proxy and give args_valid the allow/deny lists and schemas")
    # A key given as null is refused, as Assay refuses it (it must be a list when present).
    allow = _strings(policy.get("allow", _ABSENT), "allow", ctx, field)
    deny = _strings(policy.get("deny", _ABSENT), "deny", ctx, field)
    t_allow = _strings(tools.get("allow", _ABSENT), "tools.allow", ctx, field) if isinstance(tools, dict) else []
    t_deny = _strings(tools.get("deny", _ABSENT), "tools.deny", ctx, field) if isinstance(tools, dict) else []
    out.allow = (allow or []) + (t_allow or [])
    out.deny = (deny or []) + (t_deny or [])
    schemas = policy.get("schemas")
    if schemas is not None and not isinstance(schemas, dict):
        ctx.error(E_CFG_POLICY, f"{where}: `schemas` must be a mapping {{tool: JSON Schema}}", field=field,
                  hint="key each JSON Schema by its tool's name, e.g. `schemas: {refund: {type: object}}`")
        schemas = None
    if isinstance(schemas, dict):
        defs = schemas.get("$defs")
        if defs is not None and not isinstance(defs, dict):
            ctx.error(E_CFG_POLICY, f"{where}: `schemas.$defs` must be a mapping", field=field,
                      hint="key each shared definition by its name, e.g. `$defs: {money: {type: number}}`")
        out.shared_defs = defs if isinstance(defs, dict) else None
        out.schemas = {k: v for k, v in schemas.items() if k != "$defs"}
    enforcement = policy.get("enforcement")
    if enforcement is not None:
        if not isinstance(enforcement, dict):
            ctx.error(E_CFG_POLICY, f"{where}: `enforcement` must be a mapping", field=field,
                      hint="write `enforcement: {unconstrained_tools: warn}` (or deny, allow)")
        elif "unconstrained_tools" in enforcement:
            mode = enforcement["unconstrained_tools"]
            if mode not in UNCONSTRAINED_MODES:
                ctx.error(E_CFG_POLICY, f"{where}: `enforcement.unconstrained_tools` must be one of warn, deny, allow",
                          field=field, hint="use `warn`, `deny` or `allow`")
            else:
                out.unconstrained = mode
    ignored = sorted(str(k) for k in policy if k not in _READ and k not in NOT_ENFORCED)
    if ignored:
        ctx.warn(W_CFG_NO_EFFECT, f"{where}: key(s) {ignored} are not read by args_valid (Assay ignores them too)",
                 field=field)
    if len(ctx.errors) != before:
        return None
    return out


def enforces_nothing(policy: ToolPolicy, schemas_assert_nothing: bool) -> bool:
    """Assay's effectiveness rule: a deny list, an allow list without a universal pattern, a schema
    that asserts something, or ``unconstrained_tools: deny``."""
    universal = any(p and set(p) == {"*"} for p in policy.allow)
    effective = bool(policy.deny) or (bool(policy.allow) and not universal)
    effective = effective or (bool(policy.schemas) and not schemas_assert_nothing)
    return not (effective or policy.unconstrained == "deny")


__all__ = ["ToolPolicy", "is_structured", "matches_tool_pattern", "read_structured", "enforces_nothing",
           "NOT_ENFORCED", "UNCONSTRAINED_MODES"]
