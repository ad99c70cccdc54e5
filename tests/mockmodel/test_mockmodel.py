"""Self-test of the mock model server (python3 -m unittest test_mockmodel, from this folder). No agent needed."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import threading
import unittest
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import mockmodel  # noqa: E402
import scenario  # noqa: E402


def sse_events(raw: bytes) -> list:
    out = []
    for block in raw.decode("utf-8").split("\n\n"):
        if not block.strip():
            continue
        assert block.startswith("data: "), block
        data = block[len("data: "):]
        out.append(data if data == "[DONE]" else json.loads(data))
    return out


class MockModelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.log = str(Path(cls.tmp.name) / "requests.jsonl")
        cls.scenarios = scenario.load(HERE / "scenarios.json")
        cls.server = mockmodel.MockServer(cls.scenarios, cls.log)
        cls.port = cls.server.server_address[1]
        cls.thread = threading.Thread(target=cls.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        cls.thread.start()

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        cls.server.server_close()
        cls.tmp.cleanup()

    def post(self, body: dict, path: str = "/v1/chat/completions"):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def chat(self, model: str, messages: list | None = None, path: str = "/v1/chat/completions"):
        return self.post({"model": model, "stream": True,
                          "messages": messages or [{"role": "user", "content": "hi"}]}, path)

    def test_listens_on_loopback_only(self):
        self.assertEqual(self.server.server_address[0], "127.0.0.1")

    def test_tool_scenario_streams_thinking_text_and_a_tool_call(self):
        status, raw = self.chat("tool")
        self.assertEqual(status, 200)
        events = sse_events(raw)
        self.assertEqual(events[-1], "[DONE]")
        chunks = events[:-1]
        deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
        thinking = "".join(d.get("reasoning_content", "") for d in deltas)
        text = "".join(d.get("content", "") for d in deltas)
        self.assertEqual(thinking, "The user wants me to run echo. I will call the bash tool.")
        self.assertEqual(text, "Running the command now.")
        calls = [tc for d in deltas for tc in d.get("tool_calls", [])]
        self.assertEqual(calls[0]["id"], "call_mock_echo_1")
        self.assertEqual(calls[0]["function"]["name"], "bash")
        args = "".join(tc["function"].get("arguments", "") for tc in calls)
        self.assertEqual(json.loads(args), {"command": "echo agenthost-tool-output"})
        self.assertGreater(len(calls), 2, "arguments are streamed in pieces")
        self.assertEqual(chunks[-2]["choices"][0]["finish_reason"], "tool_calls")
        self.assertEqual(chunks[-1]["choices"], [])
        self.assertEqual(chunks[-1]["usage"]["prompt_tokens"], 100)

    def test_the_turn_follows_the_conversation(self):
        history = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"},
                   {"role": "assistant", "content": None, "tool_calls": []},
                   {"role": "tool", "tool_call_id": "call_mock_echo_1", "content": "agenthost-tool-output\n"}]
        status, raw = self.chat("tool", history)
        self.assertEqual(status, 200)
        deltas = [c["choices"][0]["delta"] for c in sse_events(raw)[:-1] if c["choices"]]
        text = "".join(d.get("content", "") for d in deltas)
        self.assertIn("你好，世界! café 🌍", text)
        self.assertNotIn("tool_calls", json.dumps(deltas))
        # A third turn does not exist: a clear 400, not a hang.
        status, raw = self.chat("tool", history + [{"role": "assistant", "content": "x"}])
        self.assertEqual(status, 400)
        self.assertIn("has no turn 2", json.loads(raw)["error"]["message"])

    def test_http_errors(self):
        for name, code in (("http500", 500), ("http429", 429), ("http400", 400)):
            status, raw = self.chat(name)
            self.assertEqual(status, code)
            self.assertIn("mock", json.loads(raw)["error"]["message"])

    def test_retry_after_ms_is_sent_only_when_the_scenario_asks(self):
        def headers_of(model):
            req = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/chat/completions",
                                         data=json.dumps({"model": model, "stream": True,
                                                          "messages": [{"role": "user", "content": "hi"}]}).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
            with self.assertRaises(urllib.error.HTTPError) as caught:
                urllib.request.urlopen(req, timeout=10)
            caught.exception.read()
            return caught.exception.code, caught.exception.headers
        for name, code in (("http500-retry-now", 500), ("http429-retry-now", 429)):
            status, headers = headers_of(name)
            self.assertEqual(status, code)
            self.assertEqual(headers.get("retry-after-ms"), "0")
        self.assertIsNone(headers_of("http500")[1].get("retry-after-ms"))

    def test_attempts_answer_each_retry_differently(self):
        self.assertEqual(self.chat("flaky")[0], 503)
        status, raw = self.chat("flaky")
        self.assertEqual(status, 200)
        self.assertEqual(self.chat("flaky")[0], 200, "the last attempt stays")

    def test_cut_after_closes_the_stream_without_a_finish(self):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/s/cut-retry/v1/chat/completions",
                                     data=json.dumps({"model": "m", "stream": True,
                                                      "messages": [{"role": "user", "content": "x"}]}).encode(),
                                     method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            raw = b""
            try:
                while chunk := r.read1(65536):
                    raw += chunk
            except Exception:  # noqa: BLE001 — an incomplete chunked body is the point
                pass
        self.assertNotIn(b"[DONE]", raw)
        self.assertNotIn(b"finish_reason\":\"stop", raw)
        self.assertEqual(raw.count(b"data: "), 4)

    def test_unknown_scenario_names_the_known_ones(self):
        status, raw = self.chat("no-such-scenario")
        self.assertEqual(status, 404)
        self.assertIn("answer", json.loads(raw)["error"]["message"])

    def test_path_prefix_selects_the_scenario(self):
        status, raw = self.chat("whatever-model", path="/s/answer/v1/chat/completions")
        self.assertEqual(status, 200)
        deltas = [c["choices"][0]["delta"] for c in sse_events(raw)[:-1] if c["choices"]]
        self.assertEqual("".join(d.get("content", "") for d in deltas),
                         "".join(self.scenarios["answer"].turns[0].blocks[1].chunks))

    def test_a_client_that_goes_away_mid_stream_is_logged(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        body = json.dumps({"model": "slow", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
        s.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(body)}\r\n\r\n{body}".encode())
        first = s.recv(4096)
        self.assertIn(b"200 OK", first)
        s.close()
        # The server notices at its next write (one chunk delay later); wait for its log line, bounded.
        deadline = 50
        while deadline:
            lines = [json.loads(l) for l in Path(self.log).read_text().splitlines()] if Path(self.log).exists() else []
            if any(r.get("scenario") == "slow" and r.get("outcome") == "client_gone" for r in lines):
                break
            deadline -= 1
            threading.Event().wait(0.1)
        self.assertTrue(deadline > 0, "the slow stream was not ended when the client left")

    def test_command_line_prints_the_port(self):
        with tempfile.TemporaryDirectory() as d:
            port_file = Path(d) / "port"
            p = subprocess.Popen([sys.executable, str(HERE / "mockmodel.py"), "--port-file", str(port_file),
                                  "--max-seconds", "30"], stdout=subprocess.PIPE, text=True)
            try:
                line = p.stdout.readline()
                self.assertRegex(line, r"^PORT \d+$")
                self.assertEqual(port_file.read_text().strip(), line.split()[1])
            finally:
                p.kill()
                p.wait(10)
                p.stdout.close()


def named_sse_events(raw: bytes) -> list:
    """`event: <type>` + `data: <json>` blocks (OpenAI Responses): the data objects, checked against their names."""
    out = []
    for block in raw.decode("utf-8").split("\n\n"):
        if not block.strip():
            continue
        head, _, data = block.partition("\n")
        assert head.startswith("event: ") and data.startswith("data: "), block
        event = json.loads(data[len("data: "):])
        assert event["type"] == head[len("event: "):], block
        out.append(event)
    return out


class ResponsesWireTest(unittest.TestCase):
    """OpenAI Responses (Codex): POST …/responses."""
    setUpClass = MockModelTest.__dict__["setUpClass"]
    tearDownClass = MockModelTest.__dict__["tearDownClass"]
    post = MockModelTest.post

    CODEX_TOOLS = [{"type": "function", "name": "exec_command"}, {"type": "function", "name": "write_stdin"}]

    def responses(self, model: str, items: list | None = None, tools: list | None = None):
        return self.post({"model": model, "stream": True, "tools": self.CODEX_TOOLS if tools is None else tools,
                          "input": items or [{"type": "message", "role": "user", "content": []}]}, "/v1/responses")

    def test_tool_turn_reasoning_text_and_the_shell_call(self):
        status, raw = self.responses("tool")
        self.assertEqual(status, 200)
        events = named_sse_events(raw)
        kinds = [e["type"] for e in events]
        self.assertEqual(kinds[0], "response.created")
        self.assertEqual(kinds[-1], "response.completed")
        self.assertEqual([e["sequence_number"] for e in events], list(range(len(events))))
        self.assertEqual("".join(e["delta"] for e in events if e["type"] == "response.reasoning_summary_text.delta"),
                         "The user wants me to run echo. I will call the bash tool.")
        self.assertEqual("".join(e["delta"] for e in events if e["type"] == "response.output_text.delta"),
                         "Running the command now.")
        done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
        self.assertEqual([i["type"] for i in done], ["reasoning", "message", "function_call"])
        call = done[2]
        # The scripted generic `bash` call goes out as the shell tool the request offers.
        self.assertEqual((call["name"], call["call_id"]), ("exec_command", "call_mock_echo_1"))
        self.assertEqual(json.loads(call["arguments"]), {"cmd": "echo agenthost-tool-output"})
        pieces = [e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta"]
        self.assertEqual(len(pieces), 3)
        self.assertEqual("".join(pieces), call["arguments"])
        usage = events[-1]["response"]["usage"]
        self.assertEqual((usage["input_tokens"], usage["total_tokens"]), (100, 100 + usage["output_tokens"]))
        # Other shell tools: shell_command takes a string, shell an argv; unknown tools: unchanged.
        for tools, want in (([{"type": "function", "name": "shell_command"}], ("shell_command", {"command": "echo agenthost-tool-output"})),
                            ([{"type": "function", "name": "shell"}], ("shell", {"command": ["bash", "-lc", "echo agenthost-tool-output"]})),
                            ([], ("bash", {"command": "echo agenthost-tool-output"}))):
            events = named_sse_events(self.responses("tool", tools=tools)[1])
            call = [e["item"] for e in events if e["type"] == "response.output_item.done"][-1]
            self.assertEqual((call["name"], json.loads(call["arguments"])), want)

    def test_the_turn_counts_tool_outputs_after_the_last_user_message(self):
        items = [{"type": "message", "role": "developer", "content": []},
                 {"type": "message", "role": "user", "content": []},
                 {"type": "reasoning", "summary": []}, {"type": "message", "role": "assistant", "content": []},
                 {"type": "function_call", "call_id": "call_mock_echo_1", "name": "exec_command", "arguments": "{}"},
                 {"type": "function_call_output", "call_id": "call_mock_echo_1", "output": "agenthost-tool-output"}]
        status, raw = self.responses("tool", items)
        self.assertEqual(status, 200)
        events = named_sse_events(raw)
        text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
        self.assertIn("你好，世界! café 🌍", text)
        self.assertNotIn("function_call", [e["item"]["type"] for e in events if e["type"] == "response.output_item.done"])

    def test_http_errors_are_openai_error_bodies(self):
        for name, code, err in (("http500", 500, "server_error"), ("http429", 429, "rate_limit_exceeded")):
            status, raw = self.responses(name)
            self.assertEqual(status, code)
            body = json.loads(raw)["error"]
            self.assertIn("mock", body["message"])
            self.assertEqual(body["code"], err)


def anthropic_events(raw: bytes) -> list:
    """Anthropic SSE: `event: <type>` + `data: <json>` per event; the data objects, checked against their names."""
    out = []
    for block in raw.decode("utf-8").split("\n\n"):
        if not block.strip():
            continue
        head, _, data = block.partition("\n")
        assert head.startswith("event: ") and data.startswith("data: "), block
        event = json.loads(data[len("data: "):])
        assert event["type"] == head[len("event: "):], block
        out.append(event)
    return out


class AnthropicWireTest(unittest.TestCase):
    """Anthropic Messages (Claude Code): POST …/v1/messages."""
    setUpClass = MockModelTest.__dict__["setUpClass"]
    tearDownClass = MockModelTest.__dict__["tearDownClass"]
    post = MockModelTest.post

    def messages(self, model: str, messages: list | None = None, stream: bool = True):
        return self.post({"model": model, "stream": stream, "max_tokens": 32000,
                          "messages": messages or [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]},
                         "/v1/messages?beta=true")

    def test_tool_turn_thinking_text_and_a_bash_tool_use(self):
        status, raw = self.messages("tool")
        self.assertEqual(status, 200)
        events = anthropic_events(raw)
        kinds = [e["type"] for e in events]
        self.assertEqual(kinds[:2], ["message_start", "ping"])
        self.assertEqual(kinds[-2:], ["message_delta", "message_stop"])
        self.assertEqual(events[0]["message"]["usage"]["input_tokens"], 100)
        starts = [e for e in events if e["type"] == "content_block_start"]
        self.assertEqual([e["content_block"]["type"] for e in starts], ["thinking", "text", "tool_use"])
        self.assertEqual([e["index"] for e in starts], [0, 1, 2])
        self.assertEqual([e["index"] for e in events if e["type"] == "content_block_stop"], [0, 1, 2])
        deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
        self.assertEqual("".join(d.get("thinking", "") for d in deltas),
                         "The user wants me to run echo. I will call the bash tool.")
        # One signature, after the last thinking delta and before the block ends.
        sig = [i for i, e in enumerate(events) if e.get("delta", {}).get("type") == "signature_delta"]
        self.assertEqual(len(sig), 1)
        self.assertEqual(events[sig[0] - 1]["delta"]["type"], "thinking_delta")
        self.assertEqual(events[sig[0] + 1]["type"], "content_block_stop")
        self.assertEqual("".join(d.get("text", "") for d in deltas), "Running the command now.")
        tool = starts[2]["content_block"]
        # The scripted generic `bash` call goes out as Claude Code's `Bash` tool.
        self.assertEqual((tool["id"], tool["name"], tool["input"]), ("call_mock_echo_1", "Bash", {}))
        pieces = [d["partial_json"] for d in deltas if d["type"] == "input_json_delta"]
        self.assertGreater(len(pieces), 3, "the input is streamed in small pieces")
        self.assertEqual(json.loads("".join(pieces)), {"command": "echo agenthost-tool-output"})
        self.assertEqual(events[-2]["delta"]["stop_reason"], "tool_use")
        self.assertEqual(events[-2]["usage"]["output_tokens"], 12)

    def test_the_turn_counts_assistant_messages_after_the_last_prompt(self):
        history = [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                   {"role": "assistant", "content": [{"type": "tool_use", "id": "call_mock_echo_1", "name": "Bash",
                                                      "input": {"command": "echo agenthost-tool-output"}}]},
                   {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_mock_echo_1",
                                                 "content": "agenthost-tool-output"}]}]
        status, raw = self.messages("tool", history)
        self.assertEqual(status, 200)
        events = anthropic_events(raw)
        text = "".join(e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta")
        self.assertEqual(text, "\n\nThe command printed `agenthost-tool-output`.\n\n你好，世界! café 🌍\n- [x] done")
        self.assertNotIn("tool_use", [e["content_block"]["type"] for e in events if e["type"] == "content_block_start"])
        self.assertEqual(events[-2]["delta"]["stop_reason"], "end_turn")

    def test_a_request_without_stream_gets_one_message(self):
        status, raw = self.messages("answer", stream=False)
        self.assertEqual(status, 200)
        message = json.loads(raw)
        self.assertEqual((message["type"], message["role"], message["stop_reason"]), ("message", "assistant", "end_turn"))
        self.assertEqual([b["type"] for b in message["content"]], ["thinking", "text"])
        self.assertEqual(message["content"][0]["thinking"], "Let me think about this carefully. Done thinking.")
        self.assertTrue(message["content"][0]["signature"])
        self.assertEqual(message["content"][1]["text"], "## Answer\n\nThe answer is 42. 你好，世界! café Ωμέγα \tend.")

    def test_count_tokens(self):
        status, raw = self.post({"model": "tool", "messages": [{"role": "user", "content": "hello there"}]},
                                "/v1/messages/count_tokens?beta=true")
        self.assertEqual(status, 200)
        self.assertGreater(json.loads(raw)["input_tokens"], 0)

    def test_http_errors_are_anthropic_error_bodies(self):
        for name, code, etype in (("http500", 500, "api_error"), ("http429", 429, "rate_limit_error"),
                                  ("http400", 400, "invalid_request_error")):
            status, raw = self.messages(name)
            self.assertEqual(status, code)
            body = json.loads(raw)
            self.assertEqual(body["type"], "error")
            self.assertEqual(body["error"]["type"], etype)
            self.assertIn("mock", body["error"]["message"])


class GeminiWireTest(unittest.TestCase):
    """Gemini API (Gemini CLI): POST …/models/<model>:streamGenerateContent?alt=sse, plus its side calls."""
    setUpClass = MockModelTest.__dict__["setUpClass"]
    tearDownClass = MockModelTest.__dict__["tearDownClass"]
    post = MockModelTest.post

    TOOLS = [{"functionDeclarations": [{"name": "read_file"}, {"name": "run_shell_command"}]}]

    def generate(self, model: str, contents: list | None = None, tools: list | None = None,
                 method: str = "streamGenerateContent?alt=sse"):
        return self.post({"contents": contents or [{"role": "user", "parts": [{"text": "hi"}]}],
                          "tools": self.TOOLS if tools is None else tools}, f"/v1beta/models/{model}:{method}")

    @staticmethod
    def chunks(raw: bytes) -> list:
        blocks = raw.decode("utf-8").split("\r\n\r\n")
        assert blocks[-1] == "", blocks[-1]
        assert all(b.startswith("data: ") for b in blocks[:-1])
        return [json.loads(b[len("data: "):]) for b in blocks[:-1]]

    def test_tool_turn_thoughts_text_and_the_shell_call(self):
        status, raw = self.generate("tool")
        self.assertEqual(status, 200)
        parts = [c["candidates"][0]["content"]["parts"][0] for c in self.chunks(raw)]
        self.assertEqual("".join(p["text"] for p in parts if p.get("thought")),
                         "The user wants me to run echo. I will call the bash tool.")
        self.assertEqual("".join(p["text"] for p in parts if "text" in p and not p.get("thought")),
                         "Running the command now.")
        # The scripted generic `bash` call goes out as the run_shell_command the request declares, in one part.
        self.assertEqual(parts[-1], {"functionCall": {"id": "call_mock_echo_1", "name": "run_shell_command",
                                                      "args": {"command": "echo agenthost-tool-output"}}})
        last = self.chunks(raw)[-1]
        self.assertEqual(last["candidates"][0]["finishReason"], "STOP")
        self.assertEqual(last["usageMetadata"]["promptTokenCount"], 100)
        self.assertEqual(last["usageMetadata"]["candidatesTokenCount"], len(parts))
        self.assertTrue(all("finishReason" not in c["candidates"][0] for c in self.chunks(raw)[:-1]))
        # Without run_shell_command declared the call is sent as scripted.
        parts = [c["candidates"][0]["content"]["parts"][0] for c in self.chunks(self.generate("tool", tools=[])[1])]
        self.assertEqual(parts[-1]["functionCall"]["name"], "bash")

    def test_the_turn_counts_model_contents_after_the_last_prompt(self):
        contents = [{"role": "user", "parts": [{"text": "hi"}]},
                    {"role": "model", "parts": [{"text": "Running"}, {"functionCall": {"name": "run_shell_command"}}]},
                    {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command", "response": {}}}]}]
        status, raw = self.generate("tool", contents)
        self.assertEqual(status, 200)
        text = "".join(c["candidates"][0]["content"]["parts"][0].get("text", "") for c in self.chunks(raw))
        self.assertIn("你好，世界! café 🌍", text)

    def test_http_errors_are_google_error_bodies(self):
        for name, code, st in (("http500", 500, "INTERNAL"), ("http429", 429, "RESOURCE_EXHAUSTED")):
            status, raw = self.generate(name)
            self.assertEqual(status, code)
            self.assertEqual(json.loads(raw)["error"], {"code": code, "message": json.loads(raw)["error"]["message"],
                                                        "status": st})
            self.assertIn("mock", json.loads(raw)["error"]["message"])

    def test_side_calls_need_no_scenario(self):
        status, raw = self.generate("any-model", method="countTokens")
        self.assertEqual(status, 200)
        self.assertGreater(json.loads(raw)["totalTokens"], 0)
        status, raw = self.generate("any-model", method="generateContent")
        self.assertEqual(status, 200)
        answer = json.loads(json.loads(raw)["candidates"][0]["content"]["parts"][0]["text"])
        self.assertEqual(answer["next_speaker"], "user")


if __name__ == "__main__":
    unittest.main()
