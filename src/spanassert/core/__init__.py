"""The core every front door shares: episodes, plans and verdicts (``engine``), the call and span
model (``model``), results (``results``), telemetry out (``emit``), trace assembly (``assembly``) and
the run record (``report``).

Nothing here imports a front door (``live``, ``replay``, ``serve``); tests/test_layout.py checks it.
"""
