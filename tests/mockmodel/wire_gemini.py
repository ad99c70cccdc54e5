"""Gemini API (`POST …/models/<model>:streamGenerateContent?alt=sse`) — what Gemini CLI speaks with an API key and
`GOOGLE_GEMINI_BASE_URL`.

The model id comes from the path. A reply goes out as one `data: <GenerateContentResponse>` event per scripted chunk
(`\\r\\n\\r\\n`-separated, like Google's servers): thinking chunks as parts `{"text": …, "thought": true}`, text chunks
as `{"text": …}`, a tool call as one part `{"functionCall": {"id", "name", "args"}}` (the Gemini API never streams
arguments). The last event carries `finishReason: "STOP"` (also after a function call, as the API does) and
`usageMetadata` (`promptTokenCount` 100 per call unless scripted, one candidate token per streamed event); every other
event carries the running `usageMetadata` too, as the API does.

The scenarios script a generic shell tool (`"name": "bash", "arguments": {"command": "…"}`); it is sent as
`run_shell_command` `{"command": "…"}` when the request declares that tool (Gemini CLI), unchanged otherwise.

The turn is the number of `model` contents after the last `user` content that holds text (not a functionResponse).

Side calls are answered without a scenario: `:countTokens` → `{"totalTokens": …}` (a rough count of the request),
and a non-streaming `:generateContent` (Gemini CLI's internal helpers: next-speaker check, loop detection, routing,
summaries) → a short JSON text answer.
"""

from __future__ import annotations

import json
from typing import Iterator

from scenario import HttpError, Reply, Text, Thinking, ToolCall

_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
           429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}


def declared_tools(body: dict) -> list[str]:
    names = []
    for t in body.get("tools") or []:
        if isinstance(t, dict):
            for f in t.get("functionDeclarations") or t.get("function_declarations") or []:
                if isinstance(f, dict):
                    names.append(str(f.get("name", "")))
    return names


def _json_answer(text: str) -> bytes:
    return json.dumps({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                                       "finishReason": "STOP", "index": 0}],
                       "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 1, "totalTokenCount": 11},
                       "modelVersion": "mock"}).encode()


class GeminiWire:
    name = "gemini"
    uses_request_body = True  # stream() gets the request body (the tools it declares)

    def matches(self, method: str, path: str) -> bool:
        return method == "POST" and "/models/" in path and (
            path.endswith(":streamGenerateContent") or path.endswith(":generateContent")
            or path.endswith(":countTokens"))

    def model(self, path: str, body: dict) -> str:
        return path.rsplit("/models/", 1)[1].split(":", 1)[0]

    def direct(self, path: str, body: dict) -> tuple[int, dict[str, str], bytes] | None:
        """Answers that come from no scenario: token counts and the CLI's non-streaming helper calls."""
        headers = {"Content-Type": "application/json"}
        if path.endswith(":countTokens"):
            n = max(1, len(json.dumps(body.get("contents", body))) // 4)
            return 200, headers, json.dumps({"totalTokens": n}).encode()
        if path.endswith(":generateContent"):
            # The helpers ask for JSON (responseMimeType application/json) — e.g. the next-speaker check wants
            # {"reasoning", "next_speaker"}; "user" ends the turn, which is what a scripted model means.
            return 200, headers, _json_answer(json.dumps({"reasoning": "mockmodel: the scripted turn is over",
                                                          "next_speaker": "user"}))
        return None

    def turn_index(self, body: dict) -> int:
        contents = body.get("contents") or []
        if not isinstance(contents, list):
            return 0

        def is_prompt(c) -> bool:
            parts = c.get("parts") or []
            return (c.get("role") == "user" and any(isinstance(p, dict) and "text" in p for p in parts)
                    and not any(isinstance(p, dict) and "functionResponse" in p for p in parts))

        last_user = max((i for i, c in enumerate(contents) if isinstance(c, dict) and is_prompt(c)), default=-1)
        return sum(1 for c in contents[last_user + 1:] if isinstance(c, dict) and c.get("role") == "model")

    def summary(self, body: dict) -> dict:
        roles = []
        for c in body.get("contents") or []:
            if isinstance(c, dict):
                kinds = sorted({k for p in c.get("parts") or [] if isinstance(p, dict) for k in p
                                if k in ("text", "functionCall", "functionResponse", "thought")})
                roles.append(f"{c.get('role')}:{'+'.join(kinds)}")
        return {"contents": roles, "tools": declared_tools(body)}

    def error(self, err: HttpError) -> tuple[int, dict[str, str], bytes]:
        body = {"error": {"code": err.status, "message": err.message, "status": _STATUS.get(err.status, "UNKNOWN")}}
        return err.status, {"Content-Type": "application/json"}, json.dumps(body).encode()

    content_type = "text/event-stream"

    def stream(self, reply: Reply, model: str, request_no: int, body: dict | None = None) -> Iterator[bytes]:
        """The SSE events of `reply`, one per yielded value (the server flushes and paces between them)."""
        offered = declared_tools(body or {})
        parts: list[dict] = []
        for block in reply.blocks:
            if isinstance(block, Thinking):
                parts += [{"text": c, "thought": True} for c in block.chunks]
            elif isinstance(block, Text):
                parts += [{"text": c} for c in block.chunks]
            elif isinstance(block, ToolCall):
                name, args = block.name, block.arguments
                if name not in offered and "run_shell_command" in offered and "command" in args:
                    name, args = "run_shell_command", {"command": str(args["command"])}
                parts.append({"functionCall": {"id": block.id, "name": name, "args": args}})
        candidates_total = reply.completion_tokens if reply.completion_tokens is not None else len(parts)
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            candidate: dict = {"content": {"role": "model", "parts": [part]}, "index": 0}
            if last:
                candidate["finishReason"] = "STOP"
            out = candidates_total if last else min(i + 1, candidates_total)
            chunk = {"candidates": [candidate],
                     "usageMetadata": {"promptTokenCount": reply.prompt_tokens, "candidatesTokenCount": out,
                                       "totalTokenCount": reply.prompt_tokens + out},
                     "modelVersion": model, "responseId": f"mock-{request_no}"}
            yield b"data: " + json.dumps(chunk, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\r\n\r\n"
