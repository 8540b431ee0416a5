"""The one list of the modules spanassert's compiled build compiles with mypyc, and the mypy that
compiles them (read by setup.py, the build backend spanassert_build.py, compiled_venv.py and
tests/test_build.py). Plain data: importing it needs nothing installed."""
from __future__ import annotations

# The mypy that compiles (the same pin as the lint's, pyproject.toml's `test` extra): mypyc's output
# and its run-time checks change between versions, so a build is reproducible only with one version.
# mypy 2 runs on Python 3.10+: a 3.9 interpreter always builds pure.
MYPY = "mypy==2.4.1"
MIN_PYTHON = (3, 10)
# Stubs that mypy needs to type-check the compiled modules' imports (with the run-time dependencies).
TYPE_STUBS = ["types-PyYAML==6.0.12.20261122"]

# The modules compiled by mypyc (paths under src/): the engine, its episodes and rule types (native10's
# source edits for native classes, issue 15), the mapping, the reading side of replay, trace assembly
# (shared by replay and serve), serve's engine thread (receiver.py) and live/sdk.py. Every module
# here must compile without a mypyc error, import, and run the whole suite unchanged (make
# test-compiled); tests/test_build.py checks statically that no pure class descends from a compiled one
# (one that does must allow interpreted subclasses: core/native.py's mypyc_attr). Never compiled:
#   a package __init__.py (a compiled one has no submodules to import: ModuleNotFoundError);
#   core/records.py and core/native.py (their `if TYPE_CHECKING: ... else:` fallbacks are "unreachable"
#   to mypyc, which then raises);
#   otlp/json_structs.py (msgspec builds its decoders from these generic Struct classes; a compiled
#   module's generic classes cannot be subscripted: `_Traces[_Span]`).
# Compiled with a non-native class inside (mypyc_attr(native_class=False): a Python class whose methods
# are compiled): core/assembly.py's TraceSpans (a native class cannot subclass list; TraceBuffer allows
# interpreted subclasses: a test's reference buffer) and serve/receiver.py's Receiver (tests spy on one
# receiver's method and on the class's `start`).
# Left out of serve/: intake.py (per request, not per span; tests/serve_harness.py patches
# IntakeQueue.get), http_server.py (its handler class is made inside a function), sink.py (a Telemetry,
# core/emit.py, which is not compiled) and the rest (start-up, TLS, forwarding: not per span).
# Left out of config/ (the rules-file load; its modules but source.py compile without an error, session
# 7): replay/cli.py copies a Config with copy.copy (a native class copies its fields only when declared
# serializable: untried), and tests patch config/source.py's loaders; not yet run against the suite.
# Not yet: the expected/ and rules/ rule types, live/ beyond live/sdk.py (session 7: the processor
# subclasses the SDK's SpanProcessor and its mixins; sdk.py is functions and closures).
MODULES = [
    "spanassert/core/engine.py",
    "spanassert/core/calls.py",
    "spanassert/core/precheck.py",
    "spanassert/core/toolcall.py",
    "spanassert/core/lifecycle.py",
    "spanassert/core/verdicts.py",
    "spanassert/core/episode.py",
    "spanassert/core/model.py",
    "spanassert/core/plan.py",
    "spanassert/core/results.py",
    "spanassert/core/spans.py",
    "spanassert/core/durations.py",
    "spanassert/core/diagnostics.py",
    "spanassert/core/exports.py",
    "spanassert/core/escaping.py",
    "spanassert/core/suggest.py",
    "spanassert/mapping/_content.py",
    "spanassert/mapping/_rules.py",
    "spanassert/mapping/conventions.py",
    "spanassert/mapping/mapper.py",
    "spanassert/mapping/usage.py",
    "spanassert/assertions/base.py",
    "spanassert/assertions/values.py",
    "spanassert/assertions/detectors.py",
    "spanassert/assertions/sensitive.py",
    "spanassert/assertions/loops.py",
    "spanassert/assertions/flow.py",
    "spanassert/assertions/budgets.py",
    "spanassert/assertions/tool_calls.py",
    "spanassert/assertions/call_checks.py",
    "spanassert/assertions/sequence.py",
    "spanassert/assertions/allowlist.py",
    "spanassert/assertions/steps.py",
    "spanassert/assertions/ending.py",
    "spanassert/assertions/selectors.py",
    "spanassert/assertions/schema_fast.py",
    "spanassert/assertions/args_policy.py",
    "spanassert/assertions/result_grammar.py",
    "spanassert/otlp/json_decode.py",
    "spanassert/otlp/json_lines.py",
    "spanassert/otlp/json_typed.py",
    "spanassert/otlp/framed.py",
    "spanassert/otlp/proto_decode.py",
    "spanassert/otlp/proto_wire.py",
    "spanassert/otlp/reader.py",
    "spanassert/otlp/issues.py",
    "spanassert/replay/driver.py",
    "spanassert/core/assembly.py",
    "spanassert/serve/receiver.py",
    # The live processor's every read of an SDK span, and the callbacks that answer most spans before
    # the processor's own methods run (sdk.fast_callbacks): functions and closures, no class.
    "spanassert/live/sdk.py",
]
# The shared library that holds the compiled code, inside the package (not a top-level name).
GROUP = "spanassert._compiled"
