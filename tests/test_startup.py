"""CLI start-up stays light: a subcommand imports what it needs when it runs (issue 15). These pin
the imports structurally (module names from `python -X importtime`), not a timing."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List, Set

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("grpc", "opentelemetry.exporter", "opentelemetry.sdk", "jsonschema", "google.protobuf", "yaml",
         "spanassert.serve", "spanassert.replay", "spanassert.live", "spanassert.config", "spanassert.core.engine")


def imported(*args: str, cwd: Path = ROOT) -> "tuple[Set[str], subprocess.CompletedProcess[str]]":
    """Every module `python -X importtime <args>` imported, and the finished process."""
    env = dict(os.environ)
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    proc = subprocess.run([sys.executable, "-X", "importtime", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    names = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    names.discard("package")  # the header line
    assert "spanassert" in names or "spanassert.cli" in names, proc.stderr[-2000:]
    return names, proc


def heavy(names: Set[str], prefixes: "tuple[str, ...]" = HEAVY) -> List[str]:
    return sorted(n for n in names if any(n == p or n.startswith(p + ".") for p in prefixes))


@pytest.mark.parametrize("argv", [["--version"], ["--help"], []])
def test_version_and_help_import_no_subcommand_module(argv: List[str]) -> None:
    names, proc = imported("-m", "spanassert", *argv)
    assert proc.returncode == (2 if not argv else 0), proc.stderr[-2000:]
    if argv == ["--version"]:
        assert proc.stdout.startswith("spanassert ")
    if argv == ["--help"]:
        for command in ("validate", "schema", "replay", "serve", "init", "mcp-proxy", "completion"):
            assert command in proc.stdout
    assert heavy(names) == []


def test_importing_the_cli_imports_nothing_heavy() -> None:
    names, proc = imported("-c", "import spanassert.cli")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert heavy(names) == []


def test_top_level_help_lists_each_commands_own_one_line_help() -> None:
    # `spanassert --help` lists SUBCOMMANDS' text without importing the commands; it must say what
    # each command's own parser says.
    from spanassert.cli import SUBCOMMANDS, build_parser

    parser = build_parser(None, full=True)
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    own = {a.dest: a.help for a in sub._choices_actions}
    assert own == {name: entry[2] for name, entry in SUBCOMMANDS.items()}


def test_json_replay_imports_no_protobuf_no_grpc_no_exporter(tmp_path: Path) -> None:
    # examples/rules.yaml has a trace_args_valid schema of plain keywords: it is checked against its
    # meta-schema, and the refund over the limit worded, without jsonschema (assertions/schema_meta.py).
    names, proc = imported("-m", "spanassert", "replay", "--config", "examples/rules.yaml",
                           "examples/recorded/support-agent.jsonl")
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]  # the example has violations
    assert "episode" in proc.stdout
    assert heavy(names, ("grpc", "google.protobuf", "opentelemetry.exporter", "opentelemetry.sdk",
                         "spanassert.serve", "spanassert.live", "jsonschema")) == []
    assert "amount: violates `maximum` 500" in proc.stdout


def test_rules_without_json_schemas_load_and_replay_without_jsonschema(tmp_path: Path) -> None:
    # Config values (match, sequence rules, durations, lists) are checked without jsonschema when they
    # are plainly valid; a rules file with no JSON Schema in it never imports it.
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "version: 1\n"
        "tests:\n"
        "  - id: no-delete\n"
        "    match: { agent: support-agent }\n"
        "    assertions:\n"
        "      - type: trace_must_not_call_tool\n"
        "        tool: delete_customer\n"
        "      - type: trace_tool_duration\n"
        "        max: 2s\n"
        "  - id: order\n"
        "    expected:\n"
        "      type: sequence_valid\n"
        "      rules:\n"
        "        - type: before\n"
        "          first: lookup_order\n"
        "          then: issue_refund\n",
        encoding="utf-8",
    )
    names, proc = imported("-m", "spanassert", "replay", "--config", str(rules),
                           str(ROOT / "examples/recorded/support-agent.jsonl"))
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "no-delete" in proc.stdout or "episode" in proc.stdout
    assert heavy(names, ("jsonschema", "grpc", "google.protobuf")) == []


def test_a_bad_config_value_is_still_worded_by_jsonschema(tmp_path: Path) -> None:
    # The fast path only says "plainly valid"; anything else keeps today's specific error.
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "version: 1\n"
        "tests:\n"
        "  - id: order\n"
        "    expected:\n"
        "      type: sequence_valid\n"
        "      rules:\n"
        "        - type: before\n"
        "          first: 7\n"
        "          then: issue_refund\n",
        encoding="utf-8",
    )
    proc = subprocess.run([sys.executable, "-m", "spanassert", "validate", str(rules)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "first" in proc.stdout and "rules.yaml:8" in proc.stdout, proc.stdout


def test_the_keyword_table_used_without_jsonschema_is_draft_2020_12s() -> None:
    import jsonschema

    from spanassert.assertions.schema_fast import DRAFT_2020_12_KEYWORDS, plainly_valid

    assert set(jsonschema.Draft202012Validator.VALIDATORS) == DRAFT_2020_12_KEYWORDS
    schema = {"oneOf": [{"type": "number", "minimum": 0},
                        {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*(ms|s)\s*$"}]}
    for value in (0, 3.5, "2s", " 10 ms ", -1, "2 days", True, None, [1], {"a": 1}):
        expected = not list(jsonschema.Draft202012Validator(schema).iter_errors(value))
        # plainly_valid never says valid where jsonschema finds an error, and here it decides all.
        assert plainly_valid(schema, value) is expected, value


# -- GC tuning belongs to the CLI process only (issue 15: "GC tuning stays out of the library") --------
def test_replay_as_the_program_freezes_what_is_loaded_and_raises_the_first_threshold() -> None:
    code = ("import gc, sys\n"
            "from spanassert.cli import main\n"
            "before = gc.get_threshold()\n"
            "sys.argv = ['spanassert', 'replay', '--config', 'examples/rules.yaml',\n"
            "            'examples/recorded/support-agent.jsonl']\n"
            "rc = main()\n"
            "print('RESULT', rc, before[0], gc.get_threshold()[0], gc.get_freeze_count() > 0)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    result = [line for line in proc.stdout.splitlines() if line.startswith("RESULT")]
    assert result == ["RESULT 1 700 50000 True"], proc.stdout[-2000:] + proc.stderr[-2000:]


def test_serve_as_the_program_freezes_what_is_loaded_and_raises_the_first_threshold() -> None:
    # The engine thread holds every buffered span; serve tunes the collector as replay does, as a
    # program only. The receiver reports the collector's settings once it listens, then stops.
    code = ("import gc, os, signal, sys\n"
            "from spanassert.serve import receiver\n"
            "start = receiver.Receiver.start\n"
            "def started(self):\n"
            "    start(self)\n"
            "    print('RESULT', gc.get_threshold()[0], gc.get_freeze_count() > 0, flush=True)\n"
            "    os.kill(os.getpid(), signal.SIGTERM)\n"
            "receiver.Receiver.start = started\n"
            "from spanassert.cli import main\n"
            "sys.argv = ['spanassert', 'serve', '--config', 'examples/rules.yaml', '--quiet',\n"
            "            '--grpc-endpoint', '127.0.0.1:0', '--http-endpoint', '127.0.0.1:0']\n"
            "print('RC', main())\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    result = [line for line in proc.stdout.splitlines() if line.startswith(("RESULT", "RC"))]
    assert result == ["RESULT 50000 True", "RC 0"], proc.stdout[-2000:] + proc.stderr[-2000:]


def test_main_called_by_another_program_leaves_the_collector_alone() -> None:
    code = ("import gc, io, contextlib\n"
            "from spanassert.cli import main\n"
            "before = gc.get_threshold()\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    rc = main(['replay', '--config', 'examples/rules.yaml', 'examples/recorded/support-agent.jsonl'])\n"
            "print('RESULT', rc, gc.get_threshold() == before, gc.get_freeze_count())\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    result = [line for line in proc.stdout.splitlines() if line.startswith("RESULT")]
    assert result == ["RESULT 1 True 0"], proc.stdout[-2000:] + proc.stderr[-2000:]


def test_mcp_proxy_help_imports_neither_mcp_nor_the_sdk() -> None:
    # The proxy's module is imported for its own --help; mcp, anyio, the SDK and the rules engine
    # only when it runs. (Read from sys.modules: -X importtime leaves out a module whose import
    # argparse's exit interrupts.)
    code = ("import sys\nfrom spanassert.cli import main\ntry:\n    main(['mcp-proxy', '--help'])\n"
            "finally:\n    sys.stderr.write('\\n'.join(sorted(sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    names = set(proc.stderr.splitlines())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "spanassert[mcp]" in proc.stdout
    assert "spanassert.live.guard_adapters.mcp_proxy" in names
    running_only = ("mcp", "mcp_types", "anyio", "pydantic", "spanassert.live.processor", "spanassert.live.guard")
    assert heavy(names, (*(p for p in HEAVY if p != "spanassert.live"), *running_only)) == []


def test_the_lazy_registries_name_the_module_of_every_type_and_every_type() -> None:
    """Each registry's table (type name -> module) is what the modules register, and nothing else."""
    code = ("import json; from spanassert.assertions import registry; "
            "reg = {n: {k: c.__module__ for k, c in r.items()} for n, r in "
            "(('a', registry.ASSERTION_TYPES), ('e', registry.EXPECTED_TYPES))}; "
            "tables = {'a': registry._ASSERTION_MODULES, 'e': registry._EXPECTED_MODULES}; "
            "print(json.dumps([reg, {n: {k: 'spanassert.assertions.' + m for k, m in t.items()} "
            "for n, t in tables.items()}]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    registered, tables = json.loads(out)
    assert registered == tables
    assert len(registered["a"]) > 15 and len(registered["e"]) > 10


def test_loading_a_rules_file_imports_only_the_assertion_modules_it_names(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("version: 1\ntests:\n  - id: t\n    assertions:\n"
                     "      - {type: trace_must_not_call_tool, tool: x}\n      - {type: trace_no_repeat, max: 2}\n")
    code = ("import sys; from spanassert import load_config; load_config(sys.argv[1]); "
            "print(sorted(m for m in sys.modules if m.startswith('spanassert.assertions.')))")
    out = subprocess.run([sys.executable, "-c", code, str(rules)], capture_output=True, text=True, check=True).stdout
    loaded = set(ast.literal_eval(out))
    assert {"spanassert.assertions.tool_calls", "spanassert.assertions.loops"} <= loaded
    for other in ("flow", "sensitive", "budgets", "expected", "sequence", "unit", "allowlist", "ending"):
        assert f"spanassert.assertions.{other}" not in loaded, other
