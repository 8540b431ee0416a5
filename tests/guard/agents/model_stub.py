"""A scripted stand-in for a model API on 127.0.0.1, for the guard adapters' agent scripts: the
framework's real model client talks HTTP to it, it answers each request with the next scripted turn
and records every request body (so a test can assert what the model was sent after a refusal).

- :class:`GeminiStub`: the Gemini API's ``models/{model}:generateContent`` (google-genai, Google ADK).
- :class:`ChatCompletionsStub`: OpenAI-style ``/v1/chat/completions`` with ``stream: true`` (the
  llama.cpp server API that Strands' ``LlamaCppModel`` speaks).

A turn is ``("call", name, arguments)`` (the model asks for a tool) or ``("text", words)`` (a final
answer). Nothing leaves the machine: the server binds 127.0.0.1 on a free port.
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Sequence, Tuple

Turn = Tuple[Any, ...]


class _Stub:
    def __init__(self, turns: Sequence[Turn]) -> None:
        self.turns = list(turns)
        self.requests: List[Dict[str, Any]] = []
        self.paths: List[str] = []
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with stub._lock:
                    stub.paths.append(self.path)
                    stub.requests.append(json.loads(body or b"{}"))
                    index = len(stub.requests) - 1
                turn = stub.turns[index] if index < len(stub.turns) else ("text", "(the script has no more turns)")
                stub.answer(self, index, turn)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def answer(self, handler: BaseHTTPRequestHandler, index: int, turn: Turn) -> None:
        raise NotImplementedError

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, body: bytes, content_type: str) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class GeminiStub(_Stub):
    """``POST /{version}/models/{model}:generateContent`` answered with one candidate per turn."""

    def answer(self, handler: BaseHTTPRequestHandler, index: int, turn: Turn) -> None:
        if turn[0] == "call":
            part: Dict[str, Any] = {"functionCall": {"name": turn[1], "args": turn[2], "id": f"call-{index + 1}"}}
        else:
            part = {"text": turn[1]}
        body = {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
                "modelVersion": "scripted"}
        self._send(handler, json.dumps(body).encode(), "application/json")


class ChatCompletionsStub(_Stub):
    """``POST /v1/chat/completions`` (``stream: true``) answered as server-sent event chunks."""

    def answer(self, handler: BaseHTTPRequestHandler, index: int, turn: Turn) -> None:
        base = {"id": f"chatcmpl-{index}", "object": "chat.completion.chunk", "created": 0, "model": "scripted"}
        if turn[0] == "call":
            delta: Dict[str, Any] = {"role": "assistant", "tool_calls": [{
                "index": 0, "id": f"call-{index + 1}", "type": "function",
                "function": {"name": turn[1], "arguments": json.dumps(turn[2])}}]}
            finish = "tool_calls"
        else:
            delta = {"role": "assistant", "content": turn[1]}
            finish = "stop"
        chunks = [
            {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
            {**base, "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}},
        ]
        body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        self._send(handler, body.encode(), "text/event-stream")
