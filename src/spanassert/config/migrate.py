"""``spanassert migrate FILE``: an Assay v0 rules file (no ``version``, or ``version: 0``) in the V1 form.

What it changes is what Assay's own ``assay migrate`` changes (crates/assay-cli/src/cli/commands/
migrate.rs and crates/assay-core/src/config/resolve.rs, read for the facts):

- ``version: 1`` is set (a missing ``version``, ``version: 0`` or ``configVersion: 0``);
- ``expected: {$ref: FILE}`` is replaced by the block in FILE (paths inside it made relative to the
  rules file);
- ``expected: {type: args_valid, policy: FILE}`` gets the file's ``{tool: schema}`` map inline as
  ``schema:``; a structured (v2) policy file stays referenced (Assay refuses to migrate it);
- ``expected: {type: sequence_valid, policy: FILE}`` gets the file's tool list inline as ``sequence:``,
  or its rules as ``rules:``; a policy with ``aliases`` stays referenced (inlined rules would lose them);
- the legacy ``expected:`` shapes are written tagged, as Assay writes them back: a one-entry list
  becomes the entry, ``{must_contain: "x"}`` becomes ``{type: must_contain, must_contain: ["x"]}``,
  ``{sequence: [...]}`` / ``type: sequence`` become ``type: sequence_valid``, ``{schema: ...}`` becomes
  ``type: args_valid``, and ``semantic_similarity_to``'s aliases ``text`` / ``threshold`` become
  ``semantic_similarity_to`` / ``min_score``.

The result must load (it is checked before anything is written); the original is kept as
``FILE.bak`` (Assay's backup name). Comments are not kept: the file is written from its data.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Dict, List, Optional, Tuple

EXIT_OK = 0
EXIT_CONFIG = 2

class MigrationError(Exception):
    """The file cannot be migrated; the message says why and where."""


def _read(path: str, base_dir: str, where: str) -> Any:
    """A referenced policy file, read as the loader reads one (its bounds and checks)."""
    from ..assertions.base import BuildContext
    from ..assertions.expected.common import load_policy_file

    ctx = BuildContext(base_dir=base_dir)
    value = load_policy_file(path, ctx, "policy")
    if ctx.errors:
        _, message, _, hint = ctx.errors[0]
        raise MigrationError(f"{where}: {message}" + (f" ({hint})" if hint else ""))
    return value


def _tagged(block: Dict[str, Any]) -> Tuple[Dict[str, Any], Optional[str]]:
    """A legacy ``expected:`` shape in the tagged form (and what changed), as the loader reads it."""
    from .schema import EXPECTED_TYPE_ALIASES, LEGACY_EXPECTED

    if "type" not in block and len(block) == 1 and next(iter(block)) in LEGACY_EXPECTED:
        key, value = next(iter(block.items()))
        if key == "must_contain" and isinstance(value, str):
            value = [value]
        return {"type": LEGACY_EXPECTED[key], key: value}, f"legacy `expected: {{{key}: ...}}` written tagged"
    t = block.get("type")
    if isinstance(t, str) and t in EXPECTED_TYPE_ALIASES:
        return {**block, "type": EXPECTED_TYPE_ALIASES[t]}, f"`type: {t}` -> `type: {EXPECTED_TYPE_ALIASES[t]}`"
    if t == "semantic_similarity_to" and ("text" in block or "threshold" in block):
        renamed = {{"text": "semantic_similarity_to", "threshold": "min_score"}.get(k, k): v for k, v in block.items()}
        if len(renamed) == len(block):
            return renamed, "`text` / `threshold` -> `semantic_similarity_to` / `min_score`"
    return block, None


def _rebase(block: Dict[str, Any], ref_dir: str, base_dir: str) -> Dict[str, Any]:
    """Paths in a block read from ``ref_dir``, made relative to the rules file's folder."""
    out = dict(block)
    for key in ("policy", "schema_file"):
        p = out.get(key)
        if isinstance(p, str) and p and not os.path.isabs(p):
            out[key] = os.path.relpath(os.path.join(ref_dir, p), base_dir)
    return out


def _expected(test_id: str, raw: Any, base_dir: str, changes: List[str], notes: List[str]) -> Any:
    where = f"test `{test_id}` expected"
    if isinstance(raw, list):
        if len(raw) != 1:
            raise MigrationError(f"{where}: a list of {len(raw)} checks; `expected:` holds exactly one (split the "
                                 "checks into separate tests, or move the extra checks to `assertions:`)")
        raw = raw[0]
        changes.append(f"{where}: one-entry list -> the entry")
    if not isinstance(raw, dict):
        return raw  # the loader says what is wrong with it
    if list(raw) == ["$ref"] and isinstance(raw["$ref"], str):
        path = raw["$ref"]
        loaded = _read(path, base_dir, where)
        if isinstance(loaded, list) and len(loaded) == 1:
            loaded = loaded[0]
        if not isinstance(loaded, dict):
            raise MigrationError(f"{where}: `$ref: {path}` must hold one `expected:` block (a mapping)")
        full = path if os.path.isabs(path) else os.path.join(base_dir, path)
        raw = _rebase(loaded, os.path.dirname(full), base_dir)
        changes.append(f"{where}: `$ref: {path}` inlined")
    block, change = _tagged(raw)
    if change:
        changes.append(f"{where}: {change}")
    t = block.get("type")
    policy = block.get("policy")
    if t == "args_valid" and isinstance(policy, str) and block.get("schema") is None:
        loaded = _read(policy, base_dir, where)
        from ..assertions.args_policy import is_structured

        if is_structured(loaded):
            notes.append(f"{where}: `policy: {policy}` is a structured (v2) policy; kept as a reference")
        else:
            block = {k: v for k, v in block.items() if k != "policy"}
            block["schema"] = loaded
            changes.append(f"{where}: args_valid `policy: {policy}` inlined as `schema:`")
    elif (t == "sequence_valid" and isinstance(policy, str) and block.get("sequence") is None
          and block.get("rules") is None):
        loaded = _read(policy, base_dir, where)
        rest = {k: v for k, v in block.items() if k != "policy"}
        if isinstance(loaded, list) and all(isinstance(x, str) for x in loaded):
            block = {**rest, "sequence": loaded}
            changes.append(f"{where}: sequence_valid `policy: {policy}` inlined as `sequence:`")
        elif isinstance(loaded, dict) and loaded.get("aliases"):
            notes.append(f"{where}: `policy: {policy}` defines aliases, which inline rules cannot carry; kept as a "
                         "reference")
        elif isinstance(loaded, dict):
            block = {**rest, "rules": list(loaded.get("sequences") or [])}
            changes.append(f"{where}: sequence_valid `policy: {policy}` inlined as `rules:`")
        elif isinstance(loaded, list):
            block = {**rest, "rules": loaded}
            changes.append(f"{where}: sequence_valid `policy: {policy}` inlined as `rules:`")
        else:
            raise MigrationError(f"{where}: `policy: {policy}` must hold a list of tool names, a list of rules or a "
                                 "policy with `sequences:`")
    return block


def migrate_rules(data: Any, base_dir: str) -> Tuple[Dict[str, Any], List[str], List[str]]:
    """The V1 form of a rules file's data: ``(data, changes, notes)``; no changes when it is V1
    already. Raises :class:`MigrationError` for what cannot be migrated."""
    if not isinstance(data, dict):
        raise MigrationError("a rules file must be a mapping with `tests:`")
    if "policies" in data:
        raise MigrationError("top-level `policies:` (Assay v0) has no V1 form that keeps its meaning: move each "
                             "policy into the `assertions:` list of the test it belongs to")
    changes: List[str] = []
    notes: List[str] = []
    versions = [k for k in ("version", "configVersion") if k in data]
    if len(versions) == 2:
        raise MigrationError("both `version` and `configVersion` are given; keep one")
    value = data[versions[0]] if versions else 0
    if isinstance(value, bool) or value not in (0, 1):
        raise MigrationError(f"`{versions[0]}: {value!r}` is not a version spanassert or Assay reads (0 or 1)")
    if value == 0:
        changes.append("version: 1 (was " + (f"`{versions[0]}: 0`" if versions else "missing: Assay v0") + ")")
    out = {"version": 1, **{k: v for k, v in data.items() if k not in ("version", "configVersion")}}
    if versions and versions[0] == "configVersion" and value == 1:
        out = {"configVersion": 1, **{k: v for k, v in out.items() if k != "version"}}
    tests = out.get("tests")
    if isinstance(tests, list):
        new_tests = []
        for i, test in enumerate(tests):
            if isinstance(test, dict) and "expected" in test:
                raw_id = test.get("id")
                test_id = raw_id if isinstance(raw_id, str) else f"#{i}"
                test = {**test, "expected": _expected(test_id, test["expected"], base_dir, changes, notes)}
            new_tests.append(test)
        out["tests"] = new_tests
    return out, changes, notes


def _backup_path(path: str) -> str:
    return path + ".bak"  # Assay: the extension gets ".bak" appended (eval.yaml -> eval.yaml.bak)


# -- the command ------------------------------------------------------------------------------------
def add_migrate_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Write the V1 form of an Assay v0 rules file (no `version`, or `version: 0`): `version: 1`, "
        "`$ref` and policy files of `expected:` inlined, legacy `expected:` shapes written tagged "
        "(what `assay migrate` does). The original is kept as FILE.bak; the result is loaded before it is "
        "written. Comments are not kept."
    )
    p.add_argument("file", metavar="FILE", help="the rules file to migrate (changed in place)")
    p.add_argument("--check", action="store_true",
                   help="only say whether FILE needs migrating: exit 2 if it does, 0 if not")
    p.add_argument("--dry-run", action="store_true", help="print the migrated file instead of writing it")
    p.add_argument("-o", "--output", metavar="PATH", help="write the migrated file here instead of over FILE "
                   "(no backup is made)")
    p.set_defaults(func=run_migrate)


def run_migrate(args: argparse.Namespace) -> int:
    from ..core.model import ConfigError
    from .loader import load_config
    from .source import SourceProblem, parse_document, read_source
    from .yaml_values import safe_dump

    path: str = args.file
    err = sys.stderr
    try:
        source = read_source(path)
        document = parse_document(source)
    except SourceProblem as problem:
        for d in problem.diagnostics:
            err.write(d.format() + "\n")
        return EXIT_CONFIG
    if document.problems:
        for d in document.problems:
            err.write(d.format() + "\n")
        return EXIT_CONFIG
    base_dir = os.path.dirname(os.path.abspath(path))
    try:
        data, changes, notes = migrate_rules(document.value, base_dir)
    except MigrationError as exc:
        err.write(f"{path}: cannot migrate: {exc}\n")
        return EXIT_CONFIG
    for n in notes:
        err.write(f"{path}: note: {n}\n")
    if not changes:
        sys.stdout.write(f"{path}: already in the V1 form; nothing to migrate\n")
        return EXIT_OK
    if args.check:
        sys.stdout.write(f"{path}: needs migrating (run `spanassert migrate {path}`):\n"
                         + "".join(f"  - {c}\n" for c in changes))
        return EXIT_CONFIG
    text = safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False)
    target = args.output or path
    # The result must load before anything is written: a temporary file beside the target, so that
    # paths relative to the rules file resolve as they will.
    tmp = os.path.join(os.path.dirname(os.path.abspath(target)), f".{os.path.basename(target)}.migrate.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    try:
        load_config(tmp)
    except ConfigError as exc:
        os.unlink(tmp)
        err.write(f"{path}: the migrated file does not load, so nothing was written:\n")
        for d in exc.diagnostics:
            err.write("  " + d.format().replace(tmp, target) + "\n")
        return EXIT_CONFIG
    if args.dry_run:
        os.unlink(tmp)
        sys.stdout.write(text)
        return EXIT_OK
    if not args.output:
        with open(_backup_path(path), "w", encoding="utf-8") as fh:
            fh.write(source.text)
    os.replace(tmp, target)
    out = sys.stdout
    out.write(f"{path}: migrated to the V1 form" + (f" in {target}" if args.output else
                                                    f" (original kept as {_backup_path(path)})") + "\n")
    for c in changes:
        out.write(f"  - {c}\n")
    return EXIT_OK


__all__ = ["MigrationError", "migrate_rules", "add_migrate_arguments", "run_migrate"]
