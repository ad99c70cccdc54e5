#!/usr/bin/env python3
"""A scripted mock model server for the real-CLI tests (Python 3 standard library only).

    python3 tests/mockmodel/mockmodel.py [--scenarios FILE] [--port-file FILE] [--log FILE] [--max-seconds N]

Listens on 127.0.0.1 on a free port (never any other address), prints `PORT <n>` as its only stdout line and, with
--port-file, writes the number there too (atomically). Every request is answered from a scripted scenario
(scenarios.json), selected by the request's model id or by a `/s/<scenario>` prefix of the path, and logged as one
JSON line to --log. It exits by itself after --max-seconds (default 900), and when its parent goes away.

Wire formats: OpenAI Chat Completions streaming (pi's `openai-completions`), Anthropic Messages (Claude Code). Adding
another API is one module with the interface of wire_openai_chat.OpenAIChatWire, listed in WIRES below.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scenario  # noqa: E402
from prompt_digest import user_digests  # noqa: E402
from wire_anthropic import AnthropicMessagesWire  # noqa: E402
from wire_gemini import GeminiWire  # noqa: E402
from wire_openai_chat import OpenAIChatWire  # noqa: E402
from wire_openai_responses import OpenAIResponsesWire  # noqa: E402

WIRES = [OpenAIChatWire(), OpenAIResponsesWire(), AnthropicMessagesWire(), GeminiWire()]


class MockServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, scenarios: dict[str, scenario.Scenario], log_path: str | None):
        super().__init__(("127.0.0.1", 0), Handler)
        self.scenarios = scenarios
        self.log_path = log_path
        self.lock = threading.Lock()
        self.requests = 0
        self.attempts: dict[tuple[str, int], int] = {}

    def next_request_no(self) -> int:
        with self.lock:
            self.requests += 1
            return self.requests

    def next_attempt(self, scenario_name: str, turn: int) -> int:
        """How often this turn of this scenario was asked before (0 the first time)."""
        with self.lock:
            n = self.attempts.get((scenario_name, turn), 0)
            self.attempts[(scenario_name, turn)] = n + 1
            return n

    def log(self, record: dict) -> None:
        if not self.log_path:
            return
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self.lock, open(self.log_path, "a", encoding="utf-8") as f:
            f.write(line)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: MockServer

    def log_message(self, format, *args):  # noqa: A002 — keep stderr quiet; requests go to --log
        pass

    def _received(self) -> int:
        """The request's number, logged at once: a reader waits for its final record before trusting the log."""
        no = self.server.next_request_no()
        self.server.log({"n": no, "received": f"{self.command} {self.path}"})
        return no

    def do_GET(self):
        self.server.log({"n": self._received(), "method": "GET", "path": self.path, "status": 404,
                         "outcome": "no_route"})
        self._not_found()

    def do_POST(self):
        no = self._received()
        started = time.monotonic()
        record: dict = {"n": no, "method": "POST", "path": self.path}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = self.path.split("?", 1)[0]
        forced = None
        if path.startswith("/s/"):
            forced, _, rest = path[3:].partition("/")
            path = "/" + rest
        wire = next((w for w in WIRES if w.matches("POST", path)), None)
        if wire is None:
            record["outcome"] = "no_wire"
            self.server.log(record)
            return self._not_found()
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        model = wire.model(path, body)
        name = forced or model
        record.update(wire=wire.name, model=model, scenario=name, **wire.summary(body))
        record["user_digests"] = user_digests(body)  # sizes and checksums of the user messages
        direct = wire.direct(path, body) if hasattr(wire, "direct") else None
        if direct is not None:  # an answer that comes from no scenario (e.g. Anthropic's count_tokens)
            record.update(status=direct[0], outcome="direct", turn=None)
            self.server.log(record)
            return self._send(*direct)
        sc = self.server.scenarios.get(name)
        if sc is None:
            turn: scenario.Turn = scenario.HttpError(
                404, f"mockmodel: unknown scenario '{name}' (known: {', '.join(sorted(self.server.scenarios))})",
                "not_found_error")
            record["turn"] = None
        else:
            index = wire.turn_index(body)
            attempt = self.server.next_attempt(name, index)
            record.update(turn=index, attempt=attempt)
            turn = sc.turn(index, attempt)
        if isinstance(turn, scenario.HttpError):
            status, headers, payload = wire.error(turn)
            self._send(status, headers, payload)
            record.update(status=status, outcome="http_error")
        elif hasattr(wire, "streaming") and not wire.streaming(body):  # a non-streaming request: one JSON answer
            self._send(200, {"Content-Type": "application/json"}, wire.complete(turn, model, no))
            record.update(status=200, outcome="complete_json")
        else:
            record.update(status=200, outcome=self._stream(wire, turn, model, no, body, name))
        record["ms"] = round((time.monotonic() - started) * 1000)
        self.server.log(record)

    def _stream(self, wire, reply: scenario.Reply, model: str, no: int, body: dict, name: str) -> str:
        self.send_response(200)
        self.send_header("Content-Type", wire.content_type)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        delay = reply.chunk_delay_ms / 1000.0
        try:
            # A wire with `uses_request_body` also gets the request (e.g. the tools it offers).
            events = (wire.stream(reply, model, no, body) if getattr(wire, "uses_request_body", False)
                      else wire.stream(reply, model, no))
            for i, data in enumerate(events):
                if reply.cut_after is not None and i >= reply.cut_after:
                    self.close_connection = True
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return "cut"
                if i > 0 and delay > 0:
                    time.sleep(delay)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
                if i == 0:  # a separate record, before the request's own: its first event is out
                    self.server.log({"n": no, "stream_started": name})
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return "complete"
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            return "client_gone"

    def _send(self, status: int, headers: dict[str, str], payload: bytes) -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _not_found(self):
        payload = json.dumps({"error": {"message": f"mockmodel: no route for {self.command} {self.path}",
                                        "type": "not_found_error"}}).encode()
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def _watchdog(max_seconds: float, parent: int) -> None:
    """Bounded life: exit after max_seconds or when the parent is gone (reparented)."""
    deadline = time.monotonic() + max_seconds
    while time.monotonic() < deadline:
        if os.getppid() != parent:
            os._exit(0)
        time.sleep(0.5)
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    here = Path(__file__).resolve().parent
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", default=str(here / "scenarios.json"))
    ap.add_argument("--port-file")
    ap.add_argument("--log")
    ap.add_argument("--max-seconds", type=float, default=900.0)
    args = ap.parse_args(argv)

    server = MockServer(scenario.load(args.scenarios), args.log)
    port = server.server_address[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        Path(tmp).write_text(f"{port}\n")
        os.replace(tmp, args.port_file)
    print(f"PORT {port}", flush=True)
    threading.Thread(target=_watchdog, args=(args.max_seconds, os.getppid()), daemon=True).start()
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
