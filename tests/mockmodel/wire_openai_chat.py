"""OpenAI Chat Completions (`POST …/chat/completions`, `stream: true`) — what pi's `openai-completions` api speaks.

Thinking goes out as `delta.reasoning_content` (pi, llama.cpp and DeepSeek read it), text as `delta.content`, tool
calls as `delta.tool_calls` (first the id and name, then the arguments in pieces), then a chunk with the
finish_reason, a usage-only chunk (`choices: []`, as with `stream_options.include_usage`) and `data: [DONE]`.
"""

from __future__ import annotations

import json
import time
from typing import Iterator

from scenario import HttpError, Reply, Text, Thinking, ToolCall


class OpenAIChatWire:
    name = "openai-chat"

    def matches(self, method: str, path: str) -> bool:
        return method == "POST" and path.endswith("/chat/completions")

    def model(self, path: str, body: dict) -> str:
        return str(body.get("model", ""))

    def turn_index(self, body: dict) -> int:
        """Assistant messages after the last user message: 0 for a fresh prompt, +1 per tool round trip."""
        messages = body.get("messages") or []
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        return sum(1 for m in messages[last_user + 1:] if m.get("role") == "assistant")

    def summary(self, body: dict) -> dict:
        return {"roles": [m.get("role") for m in body.get("messages") or []],
                "stream": bool(body.get("stream")), "tools": [t.get("function", {}).get("name")
                                                               for t in body.get("tools") or []]}

    def error(self, err: HttpError) -> tuple[int, dict[str, str], bytes]:
        body = {"error": {"message": err.message, "type": err.type, "param": None, "code": None}}
        headers = {"Content-Type": "application/json"}
        if err.retry_after_ms is not None:  # clients that honour it retry at once (OpenCode retries 5× otherwise)
            headers["retry-after-ms"] = str(err.retry_after_ms)
        return err.status, headers, json.dumps(body).encode()

    content_type = "text/event-stream"

    def stream(self, reply: Reply, model: str, request_no: int) -> Iterator[bytes]:
        """The SSE events of `reply`, one per yielded value (the server flushes and paces between them)."""
        cid = f"chatcmpl-mock-{request_no}"
        created = int(time.time())

        def event(delta: dict | None, finish: str | None = None, usage: dict | None = None) -> bytes:
            chunk: dict = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                           "choices": [] if delta is None else
                           [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
            if usage is not None:
                chunk["usage"] = usage
            return b"data: " + json.dumps(chunk, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n\n"

        first = True
        tool_index = 0
        for block in reply.blocks:
            if isinstance(block, (Thinking, Text)):
                key = "reasoning_content" if isinstance(block, Thinking) else "content"
                for c in block.chunks:
                    delta = {key: c}
                    if first:
                        delta["role"] = "assistant"
                        first = False
                    yield event(delta)
            elif isinstance(block, ToolCall):
                head = {"index": tool_index, "id": block.id, "type": "function",
                        "function": {"name": block.name, "arguments": ""}}
                delta = {"tool_calls": [head]}
                if first:
                    delta["role"] = "assistant"
                    first = False
                yield event(delta)
                for piece in block.argument_chunks():
                    yield event({"tool_calls": [{"index": tool_index, "function": {"arguments": piece}}]})
                tool_index += 1
        yield event({}, reply.finish_reason())
        out = reply.output_tokens()
        yield event(None, usage={"prompt_tokens": reply.prompt_tokens, "completion_tokens": out,
                                 "total_tokens": reply.prompt_tokens + out})
        yield b"data: [DONE]\n\n"
