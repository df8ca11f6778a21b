#!/usr/bin/env python3
"""A scripted fake of an OpenAI-compatible chat-completions API, for driving
the real opencode CLI in the test suites (python3 standard library only).

    fake_openai_api.py serve --port-file FILE --log FILE [--script FILE] [--usage JSON] [--model NAME]
    fake_openai_api.py results LOG        every tool result the CLI sent back, as JSON lines
                                          {"id", "text"}, first seen first

The server listens on 127.0.0.1 on an ephemeral port and writes that port to
--port-file (atomically, once it listens). Every request is appended to --log
as one JSON line: {"n", "method", "path", "turn", "body", "headers"} (turn: the
script turn answered, or null; headers: [name, value] pairs as received).
--usage is a JSON object {"prompt_tokens", "completion_tokens"} reported with
every answer (by default 100 and 20). --model is the model every answer names
(by default, the one the request asked for).

The script (read again at every request, so it may be written after the
server started) is a JSON list of turns; a turn is a list of blocks:
    {"text": "..."}                                   assistant text
    {"tool": "bash", "input": {...}, "id": "name"}    a tool call (id optional;
                                                      the call's id is "call_" + id)
A turn with a tool call ends with finish_reason "tool_calls", otherwise "stop".
opencode has no structured result: the script ends with a text turn that
holds the final result in the form the prompt asks for.

Which turn answers a request is the number of assistant messages already in
that request's conversation, so a retried request gets the same turn again.
Requests that offer no tools (session titles and the like) get a short text.
Past the end of the script the answer is a text saying so. POST
/v1/chat/completions is answered as server-sent events when the request asks
to stream (chat.completion.chunk objects, then "data: [DONE]"), otherwise as
one chat.completion object; GET /v1/models lists the one model; anything else
is a 404 whose message contains "fake-api".
"""
import argparse
import itertools
import json
import os
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

USAGE = {"prompt_tokens": 100, "completion_tokens": 20}


def assistant_messages(body):
    return sum(1 for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "assistant")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, args):
        super().__init__(("127.0.0.1", 0), Handler)
        self.script_path = args.script
        self.log_path = args.log
        self.usage = dict(USAGE)
        self.usage.update(json.loads(args.usage) if args.usage else {})
        self.usage["total_tokens"] = self.usage["prompt_tokens"] + self.usage["completion_tokens"]
        self.model = args.model
        self.lock = threading.Lock()
        self.numbers = itertools.count(1)

    def log(self, entry):
        with self.lock, open(self.log_path, "a") as out:
            out.write(json.dumps(entry) + "\n")

    def load_script(self):
        if not self.script_path or not os.path.exists(self.script_path):
            return []
        with open(self.script_path) as f:
            return json.load(f)

    def blocks_for(self, turn):
        script = self.load_script()
        return script[turn] if turn < len(script) else [{"text": "The script has no more turns."}]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def log_message(self, *args):
        pass

    def header_pairs(self):
        return [[name, value] for name, value in self.headers.items()]

    def read_body(self):
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else {}
        except ValueError:
            return {"unparsed": raw.decode("latin-1")}

    def send_bytes(self, status, content_type, data):
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        self.close_connection = True

    def send_json(self, status, value):
        self.send_bytes(status, "application/json", json.dumps(value).encode())

    def log_request_entry(self, n, turn, body):
        self.server.log({"n": n, "method": self.command, "path": self.path, "turn": turn, "body": body,
                         "headers": self.header_pairs()})

    def do_GET(self):
        n = next(self.server.numbers)
        self.log_request_entry(n, None, None)
        if self.path.split("?")[0].endswith("/models"):
            model = self.server.model or "test-model"
            return self.send_json(200, {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "fake-api"}]})
        self.send_json(404, {"error": {"message": "fake-api: not here", "type": "not_found"}})

    do_HEAD = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_GET

    def do_POST(self):
        body = self.read_body()
        n = next(self.server.numbers)
        if not self.path.split("?")[0].endswith("/chat/completions"):
            self.log_request_entry(n, None, body)
            return self.send_json(404, {"error": {"message": "fake-api: not here", "type": "not_found"}})
        turn = None
        if body.get("tools"):
            turn = assistant_messages(body)
            blocks = self.server.blocks_for(turn)
        else:
            blocks = [{"text": "Scripted session"}]
        self.log_request_entry(n, turn, body)
        tool_calls = []
        for index, block in enumerate(b for b in blocks if "tool" in b):
            tool_calls.append({"index": index, "id": "call_" + str(block.get("id") or "t%s_%d_%d" % (turn, index, n)),
                               "type": "function",
                               "function": {"name": block["tool"], "arguments": json.dumps(block.get("input") or {})}})
        text = "".join(b.get("text", "") for b in blocks if "tool" not in b)
        finish = "tool_calls" if tool_calls else "stop"
        completion_id = "chatcmpl-%03d-%s" % (n, uuid.uuid4().hex[:12])
        model = self.server.model or body.get("model") or "test-model"
        if body.get("stream"):
            self.stream(completion_id, model, text, tool_calls, finish)
        else:
            message = {"role": "assistant", "content": text or None}
            if tool_calls:
                message["tool_calls"] = [{k: v for k, v in call.items() if k != "index"} for call in tool_calls]
            self.send_json(200, {"id": completion_id, "object": "chat.completion", "created": int(time.time()),
                                 "model": model, "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                                 "usage": self.server.usage})

    def stream(self, completion_id, model, text, tool_calls, finish):
        def chunk(delta, finish_reason=None, usage=None):
            value = {"id": completion_id, "object": "chat.completion.chunk", "created": int(time.time()),
                     "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
            if usage is not None:
                value["usage"] = usage
            return ("data: %s\n\n" % json.dumps(value)).encode()

        out = [chunk({"role": "assistant", "content": ""})]
        if text:
            out.append(chunk({"content": text}))
        for call in tool_calls:
            out.append(chunk({"tool_calls": [call]}))
        out.append(chunk({}, finish))
        # The usage chunk as OpenAI sends it with stream_options.include_usage:
        # no choices, the counts of the whole answer.
        out.append(("data: %s\n\n" % json.dumps({"id": completion_id, "object": "chat.completion.chunk",
                                                  "created": int(time.time()), "model": model, "choices": [],
                                                  "usage": self.server.usage})).encode())
        out.append(b"data: [DONE]\n\n")
        self.send_bytes(200, "text/event-stream", b"".join(out))


def serve(args):
    server = Server(args)
    open(args.log, "a").close()
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(tmp, args.port_file)
    server.serve_forever()


def text_of(content):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def results(args):
    seen = set()
    with open(args.log) as f:
        for line in f:
            entry = json.loads(line)
            for message in (entry.get("body") or {}).get("messages") or []:
                if not isinstance(message, dict) or message.get("role") != "tool":
                    continue
                call_id = message.get("tool_call_id", "")
                if call_id in seen:
                    continue
                seen.add(call_id)
                print(json.dumps({"id": call_id, "text": text_of(message.get("content"))}))


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--port-file", required=True)
    s.add_argument("--log", required=True)
    s.add_argument("--script")
    s.add_argument("--usage")
    s.add_argument("--model")
    r = sub.add_parser("results")
    r.add_argument("log")
    args = parser.parse_args()
    if args.command == "serve":
        serve(args)
    else:
        results(args)


if __name__ == "__main__":
    sys.exit(main())
