"""`spanassert mcp-proxy`: the latency it adds to one `tools/call` round trip (issue 17).

One real MCP client session (the `mcp` package's stdio client) to the bare test server
(tests/guard/mcp_tools_server.py) and one to the same server behind the proxy, open side by side;
blocks of calls alternate between them (the machine is shared and drifts), each call timed from
`call_tool` to its result. The calls go to tool_0 ... tool_18 in turn with distinct arguments, the
traffic the benchmark rules (common.rules_yaml(20)) expect, so no rule is broken (a broken rule
would time its violation log line, not the proxy); the proxy runs those rules plus a blocking test,
so every call is decided, and exports its spans to a file. Added latency = the proxied percentile
minus the bare one (p50, p99)."""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from typing import Dict, List

from common import rules_yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER = os.path.join(ROOT, "tests", "guard", "mcp_tools_server.py")
TARGET_P50_MS = 1.0


def _percentile(xs: List[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(calls: int = 2_000, block: int = 50) -> List[Dict[str, str]]:
    try:
        import anyio
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters, stdio_client
    except ImportError:
        return [{"figure": "MCP proxy: added latency per tools/call", "ours": "not measured: the mcp package "
                 "is not installed (pip install 'spanassert[mcp]')", "baseline": "", "ratio": "", "target": "",
                 "met": ""}]
    tmp = tempfile.mkdtemp(prefix="spanassert-mcp-bench-")
    rules = os.path.join(tmp, "rules.yaml")
    with open(rules, "w", encoding="utf-8") as f:
        f.write(rules_yaml(20) + "  - id: no-drops\n    action: block\n    assertions:\n"
                "      - type: trace_must_not_call_tool\n        tool: delete_database\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = os.path.join(ROOT, "src") + os.pathsep + env.get("PYTHONPATH", "")
    bare = StdioServerParameters(command=sys.executable, args=[SERVER], env=env, cwd=ROOT)
    proxied = StdioServerParameters(
        command=sys.executable,
        args=["-m", "spanassert", "mcp-proxy", "--config", rules, "--export", os.path.join(tmp, "spans.jsonl"),
              "--", sys.executable, SERVER], env=env, cwd=ROOT)
    times: Dict[str, List[float]] = {"bare": [], "proxied": []}

    async def measure() -> None:
        with open(os.devnull, "w") as devnull:
            async with Client(stdio_client(bare, errlog=devnull)) as b, \
                    Client(stdio_client(proxied, errlog=devnull)) as p:
                clients = {"bare": b, "proxied": p}
                seq = {"bare": 0, "proxied": 0}

                async def call(name: str) -> float:
                    k = seq[name]
                    seq[name] += 1
                    t0 = time.perf_counter()
                    result = await clients[name].call_tool(f"tool_{k % 19}", {"text": f"c{k}"})
                    took = time.perf_counter() - t0
                    assert not result.is_error, result
                    return took

                for name in clients:  # warm both paths (imports, caches, first spans)
                    for _ in range(57):
                        await call(name)
                done = 0
                turn = 0
                while done < calls:
                    order = ("bare", "proxied") if turn % 2 == 0 else ("proxied", "bare")
                    for name in order:
                        for _ in range(block):
                            times[name].append(await call(name))
                    done += block
                    turn += 1

    anyio.run(measure)
    b50, b99 = _percentile(times["bare"], 0.5), _percentile(times["bare"], 0.99)
    p50, p99 = _percentile(times["proxied"], 0.5), _percentile(times["proxied"], 0.99)
    added50, added99 = (p50 - b50) * 1000, (p99 - b99) * 1000
    n = len(times["proxied"])
    return [
        {"figure": f"MCP proxy: added latency per tools/call round trip, p50 ({n} calls each, 21 rules)",
         "ours": f"{added50:.2f} ms (proxied {p50 * 1000:.2f} ms)", "baseline": f"bare server {b50 * 1000:.2f} ms",
         "ratio": f"{p50 / b50:.1f}", "target": f"≤ {TARGET_P50_MS:g} ms added",
         "met": "yes" if added50 <= TARGET_P50_MS else "NO"},
        {"figure": "MCP proxy: added latency per tools/call round trip, p99",
         "ours": f"{added99:.2f} ms (proxied {p99 * 1000:.2f} ms)", "baseline": f"bare server {b99 * 1000:.2f} ms",
         "ratio": f"{p99 / b99:.1f}", "target": "", "met": ""},
        {"figure": "MCP proxy: round-trip spread (stdev)",
         "ours": f"{statistics.pstdev(times['proxied']) * 1000:.2f} ms",
         "baseline": f"{statistics.pstdev(times['bare']) * 1000:.2f} ms", "ratio": "", "target": "", "met": ""},
    ]


if __name__ == "__main__":  # just these rows: python benchmarks/run.py mcp
    from common import table

    print(table(run(), ["figure", "ours", "baseline", "ratio", "target", "met"]))
