"""The user messages of a request, as sizes and checksums (for large-prompt tests: did the prompt arrive intact?).

Works for every wire's body: OpenAI Chat (`messages`), Anthropic Messages (`messages`), OpenAI Responses (`input`); a
message's content is a string or a list of parts with `text`. Each user message becomes {"bytes": UTF-8 length,
"crc32": zlib.crc32 of the UTF-8 bytes, "head": first 32 characters, "tail": last 32 characters}.
"""

from __future__ import annotations

import zlib


def user_digests(body: dict) -> list[dict]:
    items = body.get("messages") or body.get("input") or []
    out = []
    for m in items if isinstance(items, list) else []:
        if not isinstance(m, dict) or m.get("role") != "user":
            continue
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
        if not isinstance(content, str):
            continue
        raw = content.encode("utf-8", "surrogatepass")
        out.append({"bytes": len(raw), "crc32": zlib.crc32(raw), "head": content[:32], "tail": content[-32:]})
    return out
