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

# The modules compiled by mypyc (paths under src/). Every module here must compile without a mypyc
# error, import, and run the whole suite unchanged (make test-compiled). No package __init__.py: a
# compiled one has no submodules to import (ModuleNotFoundError). Left out for now, and why:
#   core/records.py: its `if TYPE_CHECKING: ... else:` fallback is "unreachable" to mypyc and raises;
#   core/engine.py (multiple inheritance), and so its mixins core/precheck.py, core/lifecycle.py,
#   core/calls.py and core/verdicts.py (a pure class cannot be instantiated with a compiled class
#   among its ancestors, and two compiled bases' layouts conflict); core/episode.py, core/toolcall.py,
#   core/assembly.py and the rule modules of assertions/ (class decorators, class-level instance
#   attributes, a list subclass); assertions/base.py, core/model.py and core/diagnostics.py (Assertion,
#   EpisodeView and ConfigError are subclassed by pure classes: they need
#   mypyc_attr(allow_interpreted_subclasses=True)). native10's source edits (issue 15) add them as they
#   land. otlp/json_typed.py's msgspec Struct declarations live in otlp/json_structs.py, which stays
#   pure (a compiled module's generic classes cannot be subscripted: `_Traces[_Span]`).
MODULES = [
    "spanassert/core/plan.py",
    "spanassert/core/results.py",
    "spanassert/core/spans.py",
    "spanassert/core/durations.py",
    "spanassert/core/exports.py",
    "spanassert/core/escaping.py",
    "spanassert/core/suggest.py",
    "spanassert/mapping/_content.py",
    "spanassert/mapping/_rules.py",
    "spanassert/mapping/conventions.py",
    "spanassert/mapping/mapper.py",
    "spanassert/mapping/usage.py",
    "spanassert/assertions/values.py",
    "spanassert/assertions/detectors.py",
    "spanassert/assertions/selectors.py",
    "spanassert/assertions/schema_fast.py",
    "spanassert/assertions/args_policy.py",
    "spanassert/assertions/result_grammar.py",
    "spanassert/otlp/json_decode.py",
    "spanassert/otlp/json_lines.py",
    "spanassert/otlp/json_typed.py",
    "spanassert/otlp/framed.py",
    "spanassert/otlp/proto_decode.py",
    "spanassert/otlp/reader.py",
    "spanassert/otlp/issues.py",
    "spanassert/replay/driver.py",
]
# The shared library that holds the compiled code, inside the package (not a top-level name).
GROUP = "spanassert._compiled"
