"""Runs ``spanassert serve`` with test-only hooks installed from outside the product.

The product loop polls no test hook: tests that need one start serve through this module
(``python tests/serve_harness.py serve ...``), which patches or registers what the environment asks
for and then runs the ordinary CLI.

- ``SPANASSERT_TEST_PAUSE_FILE=PATH``: while PATH exists, the engine thread takes nothing from the
  intake queue (to fill it deterministically).
- ``SPANASSERT_TEST_NOFILE=N``: the process may open at most N file descriptors.
- ``SPANASSERT_TEST_FAULT_TYPE=1``: registers the assertion type ``test_raises`` (field ``tool``):
  judging a call of that tool raises ``RuntimeError`` inside the engine (an injected fault); with
  ``fault: close``, deciding the rule at its episode's close raises instead (a raising ``on_close``).
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Dict, Optional

PAUSE_ENV = "SPANASSERT_TEST_PAUSE_FILE"
FAULT_ENV = "SPANASSERT_TEST_FAULT_TYPE"
NOFILE_ENV = "SPANASSERT_TEST_NOFILE"


def install_pause(path: str) -> None:
    from spanassert.serve.intake import IntakeQueue

    original = IntakeQueue.get

    def get(self: Any, timeout: float) -> Any:
        while os.path.exists(path):
            time.sleep(0.02)
        return original(self, timeout)

    IntakeQueue.get = get  # type: ignore[method-assign]


def fault_type() -> Any:
    """The ``test_raises`` assertion class (not registered: :func:`install_fault_type` registers it
    for a process, ``faults.add_rule_types`` for one test)."""
    from spanassert.assertions import Assertion, BuildContext, Field

    class RaisingAssertion(Assertion):
        type_name = "test_raises"
        doc = ("Test only: when a call of `tool` starts, raises RuntimeError (`fault: error`), raises "
               "SystemExit (`fault: exit`, which ends the engine thread), or sleeps `seconds` (`fault: stall`); "
               "`fault: close` raises RuntimeError when the rule is decided at its episode's close.")
        fields = {
            "tool": Field({"type": "string"}, required=True, doc="The tool whose calls raise."),
            "fault": Field({"enum": ["error", "exit", "stall", "close"]}, default="error", doc="What happens."),
            "seconds": Field({"type": "number"}, default=0, doc="How long a stall lasts."),
        }

        def __init__(self, test_id: str, index: int, values: Dict[str, Any], ctx: BuildContext) -> None:
            super().__init__(test_id, index, values, ctx)
            self.tool = values["tool"]
            self.fault = values.get("fault", "error")
            self.seconds = float(values.get("seconds") or 0)
            self.tools = frozenset((self.tool,))

        def on_call_start(self, state: Any, call: Any) -> Optional[Any]:
            if self.fault == "close":
                return None
            if self.fault == "stall":
                time.sleep(self.seconds)
                return None
            if self.fault == "exit":
                raise SystemExit(f"injected exit judging {call.name}")
            raise RuntimeError(f"injected fault judging {call.name}")

        def on_close(self, state: Any, episode: Any) -> Any:
            if self.fault == "close":
                raise RuntimeError("injected fault deciding the rule at close")
            return super().on_close(state, episode)

    return RaisingAssertion


def install_fault_type() -> None:
    from spanassert.assertions import register

    register(fault_type())


def main() -> int:
    if os.environ.get(NOFILE_ENV):
        import resource

        n = int(os.environ[NOFILE_ENV])
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
    if os.environ.get(PAUSE_ENV):
        install_pause(os.environ[PAUSE_ENV])
    if os.environ.get(FAULT_ENV):
        install_fault_type()
    from spanassert.cli import main as cli_main

    return cli_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
