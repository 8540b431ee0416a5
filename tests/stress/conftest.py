"""Stress suite options and the figures table.

Default runs use short sizes (the whole suite stays well under 90 s on 2 cores); ``--stress-full``
runs the sizes the issue names (`make stress`). Every test records its figures with
:func:`stress.report.record`; the table is printed at the end of the session.
"""
from __future__ import annotations

from typing import Any

import pytest

from .report import print_table


def pytest_addoption(parser: Any) -> None:
    # Registered only when pytest is pointed at tests/stress (an "initial" conftest); runs that
    # start from tests/ get the short sizes, which is what `make test` wants.
    parser.addoption("--stress-full", action="store_true", default=False,
                     help="run the stress suite at full sizes (slow; `make stress`)")


class Sizes:
    """Short or full sizes: ``sizes.pick(short, full)``."""

    def __init__(self, full: bool) -> None:
        self.full = full

    def pick(self, short: Any, full: Any) -> Any:
        return full if self.full else short


@pytest.fixture(scope="session")
def sizes(request: Any) -> Sizes:
    return Sizes(bool(request.config.getoption("--stress-full", default=False)))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    print_table(terminalreporter, full=bool(config.getoption("--stress-full", default=False)))
