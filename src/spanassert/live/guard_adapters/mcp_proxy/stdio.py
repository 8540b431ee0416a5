"""The MCP proxy's transport: two pumps over the ``mcp`` package's stdio streams, the client's side
read and written without worker threads, until the client or the server goes away."""
from __future__ import annotations

import os
import sys
from typing import Any, List, Optional, Sequence, Tuple

from .gate import PROG, ProxyTelemetry

EXIT_OK = 0
EXIT_SERVER_GONE = 1
EXIT_CONFIG = 2


# -- the transport: two pumps over the mcp package's stdio streams --------------------------------------
class PipeLines:
    """The client's side of stdin as lines, read without a worker thread: the ``mcp`` package's
    default stdio streams hand each line read and each write to a thread (three thread hops per
    round trip); a non-blocking pipe read when the loop says it is readable costs none, and can be
    cancelled (so the proxy can stop when the server goes first)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""

    def __aiter__(self) -> PipeLines:
        return self

    async def __anext__(self) -> str:
        import anyio

        while True:
            cut = self.buffer.find(b"\n")
            if cut >= 0:
                line, self.buffer = self.buffer[:cut + 1], self.buffer[cut + 1:]
                return line.decode("utf-8", "replace")
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                await anyio.wait_readable(self.fd)
                continue
            if not chunk:
                if self.buffer:
                    line, self.buffer = self.buffer, b""
                    return line.decode("utf-8", "replace")
                raise StopAsyncIteration
            self.buffer += chunk


class PipeWriter:
    """The client's side of stdout, written without a worker thread (see :class:`PipeLines`)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    async def write(self, text: str) -> None:
        import anyio

        data = memoryview(text.encode("utf-8"))
        while data:
            data = data[self._write(data):]
            if data:
                await anyio.wait_writable(self.fd)

    def _write(self, data: memoryview) -> int:
        try:
            return os.write(self.fd, data)
        except BlockingIOError:
            return 0  # the pipe is full: wait until the client reads

    async def flush(self) -> None:
        return None


class ClaimedStdio:
    """The wire (fds 0 and 1) moved to private descriptors while the proxy serves, fd 0 pointed at
    the null device and fd 1 at stderr, so nothing else in the process can read or write the
    protocol (as the ``mcp`` package's own stdio server does). Pipes and sockets are read and
    written non-blocking (:class:`PipeLines`, :class:`PipeWriter`); for anything else (a terminal, a
    file) ``streams`` is None and the ``mcp`` package's own threaded streams are used."""

    def __init__(self) -> None:
        self.streams: Optional[Tuple[PipeLines, PipeWriter]] = None
        self._saved: List[Tuple[int, int]] = []

    def __enter__(self) -> ClaimedStdio:
        import stat

        try:
            modes = [os.fstat(fd).st_mode for fd in (0, 1)]
        except OSError:
            return self
        if not all(stat.S_ISFIFO(m) or stat.S_ISSOCK(m) for m in modes):
            return self
        wire_in, wire_out = os.dup(0), os.dup(1)
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            os.dup2(null, 0)
            os.dup2(2, 1)
        finally:
            os.close(null)
        self._saved = [(0, wire_in), (1, wire_out)]
        for fd in (wire_in, wire_out):
            os.set_blocking(fd, False)
        self.streams = (PipeLines(wire_in), PipeWriter(wire_out))
        return self

    def __exit__(self, *exc_info: Any) -> None:
        for fd, wire in self._saved:
            _restore(fd, wire)
        self._saved = []


def _restore(fd: int, wire: int) -> None:
    """Point ``fd`` back at the wire (blocking again, as the process was given it)."""
    try:
        os.set_blocking(wire, True)
        os.dup2(wire, fd)
    except OSError:
        pass
    finally:
        os.close(wire)


async def serve_stdio(command: Sequence[str], telemetry: ProxyTelemetry, *, exit_when_server_gone: bool = False) -> int:
    """Serve until the client closes stdin (0) or the server stops answering (1).

    Over a terminal or a file (not a pipe) the ``mcp`` package's threaded stdin reader can only be
    ended by the client's EOF: when the server is gone first, ``exit_when_server_gone`` (the proxy is
    its own process) flushes the spans and ends the process there."""
    with ClaimedStdio() as stdio:
        return await _serve(command, telemetry, stdio.streams, exit_when_server_gone)


async def _serve(command: Sequence[str], telemetry: ProxyTelemetry, streams: Optional[Tuple[PipeLines, PipeWriter]],
                 exit_when_server_gone: bool) -> int:
    import anyio
    import mcp_types as types
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    gate = telemetry.gate
    # The server gets the proxy's whole environment: the client configured it for the server.
    params = StdioServerParameters(command=command[0], args=list(command[1:]), env=dict(os.environ))
    outcome: List[int] = []
    stdin, stdout = streams if streams is not None else (None, None)

    with anyio.CancelScope() as everything:
        # the ignore below: mcp annotates narrower streams than anyio's
        async with stdio_server(stdin=stdin, stdout=stdout) as (client_read, client_write):  # type: ignore[arg-type]
            try:
                async with stdio_client(params, errlog=sys.stderr) as (server_read, server_write), \
                        anyio.create_task_group() as tg:

                    async def client_to_server() -> None:
                        async for item in client_read:
                            if isinstance(item, Exception):
                                # Not JSON-RPC: answer as a server would (parse error), keep serving.
                                await client_write.send(SessionMessage(types.JSONRPCError(
                                    jsonrpc="2.0", id=None,
                                    error=types.ErrorData(code=-32700, message=f"parse error: {str(item)[:200]}"))))
                                continue
                            message = item.message
                            if isinstance(message, types.JSONRPCRequest):
                                answer = gate.client_request(message.id, message.method, message.params)
                                if answer is not None:
                                    await client_write.send(SessionMessage(types.JSONRPCResponse(
                                        jsonrpc="2.0", id=message.id, result=answer)))
                                    continue
                            elif isinstance(message, types.JSONRPCNotification) and \
                                    message.method == "notifications/cancelled":
                                gate.client_cancelled(message.params)
                            await server_write.send(item)
                        outcome.append(EXIT_OK)
                        tg.cancel_scope.cancel()

                    async def server_to_client() -> None:
                        async for item in server_read:
                            if isinstance(item, Exception):
                                continue  # the transport logged the unparsable line; the client gets nothing
                            message = item.message
                            if isinstance(message, types.JSONRPCResponse):
                                gate.server_result(message.id, message.result)
                            elif isinstance(message, types.JSONRPCError):
                                gate.server_error(message.id, message.error.code, message.error.message)
                            await client_write.send(item)
                        outcome.append(EXIT_SERVER_GONE)
                        tg.cancel_scope.cancel()

                    tg.start_soon(client_to_server)
                    tg.start_soon(server_to_client)
            except OSError as exc:
                sys.stderr.write(f"{PROG}: cannot start the MCP server {command[0]!r}: {exc}\n")
                outcome.insert(0, EXIT_CONFIG)
            code = outcome[0] if outcome else EXIT_OK
            if code != EXIT_OK:
                if code == EXIT_SERVER_GONE:
                    sys.stderr.write(f"{PROG}: the MCP server {command[0]!r} closed its output; stopping\n")
                if streams is not None:
                    everything.cancel()  # the pipe reader is cancellable: stop reading the client
                elif exit_when_server_gone:
                    telemetry.shutdown()
                    sys.stderr.flush()
                    os._exit(code)
            await client_write.aclose()
    return outcome[0] if outcome else EXIT_OK


