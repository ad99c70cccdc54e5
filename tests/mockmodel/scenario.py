"""The scenario model of the mock model server: what a model says, independent of how it is put on the wire.

A wire format (wire_*.py) turns a `Reply` into that API's stream of events and an `HttpError` into that API's error
response. Adding Anthropic Messages, OpenAI Responses or Gemini streamGenerateContent means adding a wire module;
the scenarios stay as they are.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union


@dataclass(frozen=True)
class Thinking:
    chunks: list[str]


@dataclass(frozen=True)
class Text:
    chunks: list[str]


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict

    def arguments_json(self) -> str:
        return json.dumps(self.arguments, ensure_ascii=False, separators=(",", ":"))

    def argument_chunks(self, pieces: int = 3) -> list[str]:
        """The arguments' JSON split into `pieces` parts (models stream tool arguments piecewise)."""
        s = self.arguments_json()
        step = max(1, -(-len(s) // pieces))
        return [s[i:i + step] for i in range(0, len(s), step)]


Block = Union[Thinking, Text, ToolCall]


@dataclass(frozen=True)
class Reply:
    blocks: list[Block]
    chunk_delay_ms: int = 0
    # "stop", "length" or "tool_calls"; None = "tool_calls" when a block is a tool call, else "stop".
    finish: str | None = None
    prompt_tokens: int = 100
    completion_tokens: int | None = None  # None = one per streamed chunk
    # Close the connection after this many streamed events, without a finish (a stream cut by the network).
    cut_after: int | None = None

    def finish_reason(self) -> str:
        if self.finish:
            return self.finish
        return "tool_calls" if any(isinstance(b, ToolCall) for b in self.blocks) else "stop"

    def chunk_count(self) -> int:
        n = 0
        for b in self.blocks:
            n += len(b.argument_chunks()) + 1 if isinstance(b, ToolCall) else len(b.chunks)
        return n

    def output_tokens(self) -> int:
        return self.completion_tokens if self.completion_tokens is not None else self.chunk_count()


@dataclass(frozen=True)
class HttpError:
    status: int
    message: str
    type: str = "error"
    retry_after_ms: int | None = None  # sent as `retry-after-ms` (OpenAI SDK convention) when set


@dataclass(frozen=True)
class Attempts:
    """A turn that answers differently each time it is asked (an agent retrying it): the n-th request gets
    attempts[n], the last one from then on."""
    attempts: list[Union[Reply, HttpError]]


Turn = Union[Reply, HttpError]


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    turns: list[Union[Turn, Attempts]] = field(default_factory=list)

    def turn(self, index: int, attempt: int = 0) -> Turn:
        if 0 <= index < len(self.turns):
            t = self.turns[index]
            if isinstance(t, Attempts):
                return t.attempts[min(attempt, len(t.attempts) - 1)]
            return t
        return HttpError(400, f"mockmodel: scenario '{self.name}' has no turn {index} ({len(self.turns)} turns)",
                         "invalid_request_error")


def _chunks(value) -> list[str]:
    if isinstance(value, list):
        if not all(isinstance(c, str) for c in value):
            raise ValueError("chunks must be strings")
        return list(value)
    if isinstance(value, dict) and "repeat" in value:
        return [str(value["repeat"])] * int(value.get("count", 1))
    raise ValueError(f"bad chunk list: {value!r}")


def _block(raw: dict) -> Block:
    if "thinking" in raw:
        return Thinking(_chunks(raw["thinking"]))
    if "text" in raw:
        return Text(_chunks(raw["text"]))
    if "tool_call" in raw:
        t = raw["tool_call"]
        return ToolCall(id=t["id"], name=t["name"], arguments=dict(t.get("arguments", {})))
    raise ValueError(f"unknown block: {raw!r}")


def _turn(raw: dict) -> Union[Turn, Attempts]:
    if "attempts" in raw:
        attempts = [_turn(a) for a in raw["attempts"]]
        if not attempts or any(isinstance(a, Attempts) for a in attempts):
            raise ValueError("attempts must be a non-empty list of plain turns")
        return Attempts(attempts)
    if "http_error" in raw:
        e = raw["http_error"]
        retry = e.get("retry_after_ms")
        return HttpError(int(e["status"]), str(e["message"]), str(e.get("type", "error")),
                         None if retry is None else int(retry))
    usage = raw.get("usage", {})
    return Reply(blocks=[_block(b) for b in raw.get("blocks", [])],
                 chunk_delay_ms=int(raw.get("chunk_delay_ms", 0)),
                 finish=raw.get("finish"),
                 prompt_tokens=int(usage.get("prompt_tokens", 100)),
                 completion_tokens=usage.get("completion_tokens"),
                 cut_after=raw.get("cut_after"))


def load(path: str | Path) -> dict[str, Scenario]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return {name: Scenario(name, s.get("description", ""), [_turn(t) for t in s["turns"]])
            for name, s in data["scenarios"].items()}
