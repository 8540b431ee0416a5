"""The core every front door shares: episodes, plans and verdicts (``engine``, with ``calls``: what
calls and steps do to an episode's rules, and ``precheck``: a receiver's early check), the call and span
model (``model``: verdicts and what an assertion reports; ``toolcall``: a call's record and its
decoded content; ``spans``: decoded spans; ``diagnostics``: a rules file's problems), results
(``results``), telemetry out (``emit``), trace assembly (``assembly``) and the run record
(``report``).

Nothing here imports a front door (``live``, ``replay``, ``serve``); tests/test_layout.py checks it.
"""
