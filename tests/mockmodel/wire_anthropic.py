"""Anthropic Messages (`POST …/v1/messages`, `stream: true`) — what Claude Code speaks (`ANTHROPIC_BASE_URL`).

A streamed reply is `message_start`, `ping`, then per block `content_block_start` / `content_block_delta`… /
`content_block_stop` — thinking as `thinking_delta`s closed by one `signature_delta`, text as `text_delta`s, a tool call
as a `tool_use` block whose input arrives as `input_json_delta`s of a few characters — then `message_delta` (stop_reason,
output usage) and `message_stop`. Every SSE event carries its `event:` name, as Anthropic's API does.

Scenario tool names are the generic ones (`bash`); they go out under Claude Code's names (`Bash`, see TOOL_NAMES).
A request without `"stream": true` gets the same reply as one `message` JSON object. `POST /v1/messages/count_tokens`
is answered by `direct()` with a rough count (it is not part of any scenario). Errors use Anthropic's shape,
`{"type": "error", "error": {"type": …, "message": …}}`, with the error type Anthropic uses for that HTTP status.
"""

from __future__ import annotations

import json
from typing import Iterator

from scenario import HttpError, Reply, Text, Thinking, ToolCall

# Scenario tool name → the name Claude Code's tool has.
TOOL_NAMES = {"bash": "Bash"}

# HTTP status → Anthropic's error type (https://docs.anthropic.com/en/api/errors).
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
               503: "overloaded_error", 529: "overloaded_error"}

STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}

JSON_PIECE = 8  # characters per input_json_delta


def _is_tool_result_turn(message: dict) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


def _text_of(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


class AnthropicMessagesWire:
    name = "anthropic-messages"
    content_type = "text/event-stream"

    def matches(self, method: str, path: str) -> bool:
        return method == "POST" and (path.endswith("/messages") or path.endswith("/messages/count_tokens"))

    def model(self, path: str, body: dict) -> str:
        return str(body.get("model", ""))

    def turn_index(self, body: dict) -> int:
        """Assistant messages after the last user prompt: 0 for a fresh prompt, +1 per tool round trip. (Tool results
        come back as user messages holding `tool_result` blocks; those do not start a new turn.)"""
        messages = body.get("messages") or []
        last_prompt = max((i for i, m in enumerate(messages)
                           if m.get("role") == "user" and not _is_tool_result_turn(m)), default=-1)
        return sum(1 for m in messages[last_prompt + 1:] if m.get("role") == "assistant")

    def summary(self, body: dict) -> dict:
        messages = body.get("messages") or []
        out = {"roles": [m.get("role") for m in messages], "stream": bool(body.get("stream")),
               "tools": [t.get("name") for t in body.get("tools") or []]}
        if "thinking" in body:
            out["thinking"] = body["thinking"]
        if "max_tokens" in body:
            out["max_tokens"] = body["max_tokens"]
        return out

    def streaming(self, body: dict) -> bool:
        return bool(body.get("stream"))

    def direct(self, path: str, body: dict) -> tuple[int, dict[str, str], bytes] | None:
        """Answers that come from no scenario: token counting."""
        if not path.endswith("/count_tokens"):
            return None
        chars = len(json.dumps(body.get("messages") or [], ensure_ascii=False)) + len(json.dumps(body.get("system") or ""))
        payload = json.dumps({"input_tokens": max(1, chars // 4)}).encode()
        return 200, {"Content-Type": "application/json"}, payload

    def error(self, err: HttpError) -> tuple[int, dict[str, str], bytes]:
        etype = err.type if err.type in ERROR_TYPES.values() else ERROR_TYPES.get(err.status, "api_error")
        body = {"type": "error", "error": {"type": etype, "message": err.message},
                "request_id": f"req_mock_{err.status}"}
        headers = {"Content-Type": "application/json", "request-id": f"req_mock_{err.status}"}
        if err.status == 429:
            headers["retry-after"] = "0"
        return err.status, headers, json.dumps(body).encode()

    @staticmethod
    def _blocks(reply: Reply, request_no: int) -> list[tuple[dict, list[dict]]]:
        """(content_block_start block, its deltas) per block of the reply."""
        out = []
        for block in reply.blocks:
            if isinstance(block, Thinking):
                deltas = [{"type": "thinking_delta", "thinking": c} for c in block.chunks]
                deltas.append({"type": "signature_delta", "signature": f"bW9jay1zaWduYXR1cmUt{request_no:04d}"})
                out.append(({"type": "thinking", "thinking": "", "signature": ""}, deltas))
            elif isinstance(block, Text):
                out.append(({"type": "text", "text": ""}, [{"type": "text_delta", "text": c} for c in block.chunks]))
            elif isinstance(block, ToolCall):
                s = block.arguments_json()
                pieces = [s[i:i + JSON_PIECE] for i in range(0, len(s), JSON_PIECE)]
                out.append(({"type": "tool_use", "id": block.id, "name": TOOL_NAMES.get(block.name, block.name),
                             "input": {}}, [{"type": "input_json_delta", "partial_json": p} for p in pieces]))
        return out

    @staticmethod
    def _usage(reply: Reply, output_tokens: int) -> dict:
        return {"input_tokens": reply.prompt_tokens, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                "output_tokens": output_tokens}

    def stream(self, reply: Reply, model: str, request_no: int) -> Iterator[bytes]:
        """The SSE events of `reply`, one per yielded value (the server flushes and paces between them)."""

        def event(data: dict) -> bytes:
            return (f"event: {data['type']}\ndata: ".encode() +
                    json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n\n")

        yield event({"type": "message_start",
                     "message": {"id": f"msg_mock_{request_no}", "type": "message", "role": "assistant",
                                 "model": model, "content": [], "stop_reason": None, "stop_sequence": None,
                                 "usage": self._usage(reply, 1)}})
        yield event({"type": "ping"})
        for index, (start, deltas) in enumerate(self._blocks(reply, request_no)):
            yield event({"type": "content_block_start", "index": index, "content_block": start})
            for d in deltas:
                yield event({"type": "content_block_delta", "index": index, "delta": d})
            yield event({"type": "content_block_stop", "index": index})
        yield event({"type": "message_delta",
                     "delta": {"stop_reason": STOP_REASONS.get(reply.finish_reason(), "end_turn"),
                               "stop_sequence": None},
                     "usage": {"output_tokens": reply.output_tokens()}})
        yield event({"type": "message_stop"})

    def complete(self, reply: Reply, model: str, request_no: int) -> bytes:
        """The whole reply as one non-streaming `message` object."""
        content = []
        for start, deltas in self._blocks(reply, request_no):
            block = dict(start)
            if block["type"] == "thinking":
                block["thinking"] = "".join(d.get("thinking", "") for d in deltas)
                block["signature"] = "".join(d.get("signature", "") for d in deltas)
            elif block["type"] == "text":
                block["text"] = "".join(d["text"] for d in deltas)
            else:
                block["input"] = json.loads("".join(d["partial_json"] for d in deltas) or "{}")
            content.append(block)
        message = {"id": f"msg_mock_{request_no}", "type": "message", "role": "assistant", "model": model,
                   "content": content, "stop_reason": STOP_REASONS.get(reply.finish_reason(), "end_turn"),
                   "stop_sequence": None, "usage": self._usage(reply, reply.output_tokens())}
        return json.dumps(message, ensure_ascii=False).encode("utf-8")
