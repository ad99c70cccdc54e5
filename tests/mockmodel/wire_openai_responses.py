"""OpenAI Responses API (`POST …/responses`, `stream: true`) — what Codex speaks (`wire_api = "responses"`).

Every event goes out as `event: <type>` + `data: <json>`. A reply becomes `response.created`,
`response.in_progress`, then one output item per block, each framed by `response.output_item.added` /
`response.output_item.done`:
  - thinking: a `reasoning` item whose summary part streams as `response.reasoning_summary_text.delta`
    (`summary_index` 0; Codex turns them into its reasoning item),
  - text: a `message` item (role assistant) whose `output_text` part streams as `response.output_text.delta`,
  - tool call: a `function_call` item whose arguments stream as `response.function_call_arguments.delta` (three
    pieces),
and finally `response.completed` with `usage` (`input_tokens` 100 per call unless scripted, one output token per
streamed delta). Codex drops a stream without `response.completed` as "stream closed before response.completed".

The scenarios script a generic shell tool (`"name": "bash", "arguments": {"command": "…"}`); it is sent as the shell
tool the request offers: `shell_command` ({"command": "…"}), `exec_command` ({"cmd": "…"}) or `shell`
({"command": ["bash", "-lc", "…"]}); a tool the request offers under the scripted name is sent unchanged.

The turn is the number of `function_call_output` items after the last user message of `input`.
"""

from __future__ import annotations

import json
import time
from typing import Iterator

from scenario import HttpError, Reply, Text, Thinking, ToolCall

# How the generic scripted shell call is expressed for each shell tool a client may offer, in order of preference.
_SHELL_TOOLS = (
    ("shell_command", lambda cmd: {"command": cmd}),
    ("exec_command", lambda cmd: {"cmd": cmd}),
    ("shell", lambda cmd: {"command": ["bash", "-lc", cmd]}),
)


def tool_names(body: dict) -> list[str]:
    names = []
    for t in body.get("tools") or []:
        if isinstance(t, dict):
            names.append(str(t.get("name") or t.get("function", {}).get("name") or t.get("type") or ""))
    return names


def adapt_tool_call(call: ToolCall, offered: list[str]) -> tuple[str, dict]:
    """The (name, arguments) of `call` as the client's own tool: unchanged when offered, else its shell tool."""
    if call.name in offered or "command" not in call.arguments:
        return call.name, call.arguments
    cmd = str(call.arguments["command"])
    for name, args in _SHELL_TOOLS:
        if name in offered:
            return name, args(cmd)
    return call.name, call.arguments


class OpenAIResponsesWire:
    name = "openai-responses"
    uses_request_body = True  # stream() gets the request body (the tools it offers)

    def matches(self, method: str, path: str) -> bool:
        return method == "POST" and path.endswith("/responses")

    def model(self, path: str, body: dict) -> str:
        return str(body.get("model", ""))

    def turn_index(self, body: dict) -> int:
        items = body.get("input") or []
        if not isinstance(items, list):
            return 0
        last_user = max((i for i, it in enumerate(items)
                         if isinstance(it, dict) and it.get("role") == "user"), default=-1)
        return sum(1 for it in items[last_user + 1:]
                   if isinstance(it, dict) and it.get("type") == "function_call_output")

    def summary(self, body: dict) -> dict:
        items = body.get("input") or []
        kinds = []
        if isinstance(items, list):
            for it in items:
                if isinstance(it, dict):
                    kinds.append(it.get("role") or it.get("type") or "?")
        return {"input": kinds, "stream": bool(body.get("stream")), "tools": tool_names(body)}

    def error(self, err: HttpError) -> tuple[int, dict[str, str], bytes]:
        code = {429: "rate_limit_exceeded", 500: "server_error", 503: "server_error"}.get(err.status)
        body = {"error": {"message": err.message, "type": err.type, "param": None, "code": code}}
        return err.status, {"Content-Type": "application/json"}, json.dumps(body).encode()

    content_type = "text/event-stream"

    def stream(self, reply: Reply, model: str, request_no: int, body: dict | None = None) -> Iterator[bytes]:
        """The SSE events of `reply`, one per yielded value (the server flushes and paces between them)."""
        rid = f"resp_mock_{request_no}"
        created = int(time.time())
        offered = tool_names(body or {})
        seq = 0

        def event(kind: str, **fields) -> bytes:
            nonlocal seq
            data = {"type": kind, "sequence_number": seq, **fields}
            seq += 1
            return (f"event: {kind}\ndata: ".encode() +
                    json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n\n")

        def response(status: str, output: list, usage: dict | None = None) -> dict:
            r = {"id": rid, "object": "response", "created_at": created, "status": status, "model": model,
                 "output": output, "usage": usage}
            return r

        yield event("response.created", response=response("in_progress", []))
        yield event("response.in_progress", response=response("in_progress", []))
        output: list[dict] = []
        for index, block in enumerate(reply.blocks):
            if isinstance(block, Thinking):
                iid = f"rs_mock_{request_no}_{index}"
                yield event("response.output_item.added", output_index=index,
                            item={"id": iid, "type": "reasoning", "summary": []})
                yield event("response.reasoning_summary_part.added", item_id=iid, output_index=index,
                            summary_index=0, part={"type": "summary_text", "text": ""})
                for c in block.chunks:
                    yield event("response.reasoning_summary_text.delta", item_id=iid, output_index=index,
                                summary_index=0, delta=c)
                text = "".join(block.chunks)
                yield event("response.reasoning_summary_text.done", item_id=iid, output_index=index,
                            summary_index=0, text=text)
                yield event("response.reasoning_summary_part.done", item_id=iid, output_index=index,
                            summary_index=0, part={"type": "summary_text", "text": text})
                item = {"id": iid, "type": "reasoning", "summary": [{"type": "summary_text", "text": text}]}
            elif isinstance(block, Text):
                iid = f"msg_mock_{request_no}_{index}"
                yield event("response.output_item.added", output_index=index,
                            item={"id": iid, "type": "message", "status": "in_progress", "role": "assistant",
                                  "content": []})
                yield event("response.content_part.added", item_id=iid, output_index=index, content_index=0,
                            part={"type": "output_text", "text": "", "annotations": []})
                for c in block.chunks:
                    yield event("response.output_text.delta", item_id=iid, output_index=index, content_index=0,
                                delta=c)
                text = "".join(block.chunks)
                yield event("response.output_text.done", item_id=iid, output_index=index, content_index=0,
                            text=text)
                part = {"type": "output_text", "text": text, "annotations": []}
                yield event("response.content_part.done", item_id=iid, output_index=index, content_index=0,
                            part=part)
                item = {"id": iid, "type": "message", "status": "completed", "role": "assistant", "content": [part]}
            elif isinstance(block, ToolCall):
                iid = f"fc_mock_{request_no}_{index}"
                name, args = adapt_tool_call(block, offered)
                arguments = json.dumps(args, ensure_ascii=False, separators=(",", ":"))
                yield event("response.output_item.added", output_index=index,
                            item={"id": iid, "type": "function_call", "status": "in_progress", "name": name,
                                  "call_id": block.id, "arguments": ""})
                step = max(1, -(-len(arguments) // 3))
                for i in range(0, len(arguments), step):
                    yield event("response.function_call_arguments.delta", item_id=iid, output_index=index,
                                delta=arguments[i:i + step])
                yield event("response.function_call_arguments.done", item_id=iid, output_index=index,
                            arguments=arguments)
                item = {"id": iid, "type": "function_call", "status": "completed", "name": name,
                        "call_id": block.id, "arguments": arguments}
            else:
                continue
            output.append(item)
            yield event("response.output_item.done", output_index=index, item=item)
        out = reply.output_tokens()
        usage = {"input_tokens": reply.prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": out, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": reply.prompt_tokens + out}
        yield event("response.completed", response=response("completed", output, usage))
