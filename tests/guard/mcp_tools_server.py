"""A small real MCP server (the ``mcp`` package's ``MCPServer``, FastMCP's successor in mcp 2) for
the proxy's tests and benchmark, run as ``python tests/guard/mcp_tools_server.py`` over stdio.

Each tool's body records that it ran: it appends its name and arguments to ``<MARKER_DIR>/<tool>.ran``
(``SPANASSERT_TEST_MARKER_DIR``), so a test can prove a refused call's body never ran.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer

server = MCPServer("spanassert-test-tools")


def _ran(tool: str, **arguments: object) -> None:
    folder = os.environ.get("SPANASSERT_TEST_MARKER_DIR")
    if folder:
        with open(Path(folder) / f"{tool}.ran", "a", encoding="utf-8") as f:
            f.write(json.dumps(arguments, sort_keys=True) + "\n")


@server.tool()
def lookup_order(order_id: str) -> str:
    """Look an order up."""
    _ran("lookup_order", order_id=order_id)
    return f"order {order_id}: shipped"


@server.tool()
def issue_refund(order_id: str, amount: float) -> str:
    """Refund part of an order."""
    _ran("issue_refund", order_id=order_id, amount=amount)
    return f"refunded {amount} on {order_id}"


@server.tool()
def delete_database(name: str) -> str:
    """Drop a database (a forbidden tool in the tests' rules)."""
    _ran("delete_database", name=name)
    return f"dropped {name}"


@server.tool()
def echo(text: str) -> str:
    """Return the text (the benchmark's round trip)."""
    return text


def _bench_tool(text: str) -> str:  # noqa: ARG001 - the parameter the tool declares
    """Answer at once (the benchmark's round trips)."""
    return "ok"


# tool_0 ... tool_18: the tools the benchmark rules (benchmarks/common.py rules_yaml) expect an
# episode to call, so that the proxy's decisions are on traffic that breaks no rule.
for _i in range(19):
    server.tool(name=f"tool_{_i}")(_bench_tool)


if __name__ == "__main__":
    server.run()
