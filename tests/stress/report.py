"""Per-case figures of the stress suite, printed as one table at the end of the session.

A printed figure is not a check: every test asserts its zeros itself, then records them here so
that ``make stress`` shows, for each case, what was tried and what it cost.
"""
from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional

NA = "-"


class CaseFigures:
    __slots__ = ("case", "inputs", "exceptions_escaped", "spans_lost", "peak_memory", "memory_bound",
                 "secrets_leaked", "seconds", "note")

    def __init__(self, case: str, inputs: int, exceptions_escaped: int, spans_lost: Optional[int],
                 peak_memory: Optional[str], memory_bound: Optional[str], secrets_leaked: Optional[int],
                 seconds: Optional[float], note: str) -> None:
        self.case = case
        self.inputs = inputs
        self.exceptions_escaped = exceptions_escaped
        self.spans_lost = spans_lost
        self.peak_memory = peak_memory
        self.memory_bound = memory_bound
        self.secrets_leaked = secrets_leaked
        self.seconds = seconds
        self.note = note


_CASES: Dict[str, CaseFigures] = {}
_LOCK = threading.Lock()


def record(case: str, *, inputs: int, exceptions_escaped: int = 0, spans_lost: Optional[int] = None,
           peak_memory: Optional[str] = None, memory_bound: Optional[str] = None,
           secrets_leaked: Optional[int] = None, seconds: Optional[float] = None, note: str = "") -> None:
    """Record one case's figures (``None``: the figure does not apply to this case)."""
    with _LOCK:
        prev = _CASES.get(case)
        if prev is not None:  # a parametrised case recorded twice: add up what adds up
            inputs += prev.inputs
            exceptions_escaped += prev.exceptions_escaped
            if spans_lost is not None and prev.spans_lost is not None:
                spans_lost += prev.spans_lost
            if secrets_leaked is not None and prev.secrets_leaked is not None:
                secrets_leaked += prev.secrets_leaked
            if seconds is not None and prev.seconds is not None:
                seconds += prev.seconds
            note = "; ".join(n for n in (prev.note, note) if n)
        _CASES[case] = CaseFigures(case, inputs, exceptions_escaped, spans_lost, peak_memory, memory_bound,
                                   secrets_leaked, seconds, note)


def mib(n: float) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def _cell(v: Any) -> str:
    if v is None:
        return NA
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


def rows() -> List[List[str]]:
    with _LOCK:
        cases = [c for _, c in sorted(_CASES.items())]
    return [[c.case, _cell(c.inputs), _cell(c.exceptions_escaped), _cell(c.spans_lost), _cell(c.peak_memory),
             _cell(c.memory_bound), _cell(c.secrets_leaked), _cell(c.seconds), c.note] for c in cases]


HEADER = ["case", "inputs tried", "exceptions escaped", "spans lost", "peak memory", "bound",
          "secrets leaked", "seconds", "notes"]


def print_table(terminalreporter: Any, *, full: bool) -> None:
    table = rows()
    if not table:
        return
    widths = [max(len(HEADER[i]), *(len(r[i]) for r in table)) for i in range(len(HEADER) - 1)]
    terminalreporter.section(f"spanassert stress figures ({'full' if full else 'short'} sizes)", sep="=")

    def line(cells: List[str]) -> str:
        return " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " | " + cells[-1]

    terminalreporter.write_line(line(HEADER))
    terminalreporter.write_line("-+-".join("-" * w for w in widths) + "-+-" + "-" * 5)
    for r in table:
        terminalreporter.write_line(line(r))
