#!/usr/bin/env python3
"""A scripted fake of the Anthropic Messages API, for driving the real Claude
Code CLI in the test suites (python3 standard library only).

    fake_claude_api.py serve --port-file FILE --log FILE [--script FILE] [--never-structured]
                             [--tls-cert FILE --tls-key FILE] [--usage JSON] [--model NAME]
                             [--honest]
    fake_claude_api.py results LOG        every tool_result the CLI sent back, as JSON lines
                                          {"id", "is_error", "text"}, first seen first

The server listens on 127.0.0.1 on an ephemeral port and writes that port to
--port-file (atomically, once it listens). Every request is appended to --log
as one JSON line: {"n", "method", "path", "turn", "body", "headers"} (turn: the
script turn answered, or null; headers: [name, value] pairs as received). With
--tls-cert and --tls-key (PEM) it speaks HTTPS. --usage is a JSON object of
Messages API usage counts reported in every answer (message_start carries it
with output_tokens 1, message_delta its output_tokens); by default 100 input
and 20 output tokens. --model is the model every answer names (by default,
the one the request asked for), so a test knows the price it is metered at.
--usage's output_tokens are reported whatever the request's max_tokens (a
lying upstream); with --honest, an answer reports at most the request's
max_tokens output tokens, as the real API does.

The script (read again at every request, so it may be written after the
server started) is a JSON list of turns; a turn is a list of blocks:
    {"text": "..."}                                   a text block
    {"tool": "Bash", "input": {...}, "id": "name"}    a tool_use block (id optional;
                                                      the block's id is "toolu_" + id)
A turn with a tool_use ends with stop_reason "tool_use", otherwise "end_turn".
The result comes back the way Claude Code asks for it: a tool_use of
"StructuredOutput" with input {"status": "done"|"blocked", "summary": "..."}.

Which turn answers a request is the number of assistant messages already in
that request's conversation, so a retried request gets the same turn again.
Requests that offer no tools (session titles and the like) get a short text;
POST /v1/messages/count_tokens gets {"input_tokens": N}. Past the end of the
script, and for every StructuredOutput block under --never-structured, the
answer is plain text: Claude Code then never gets a structured result.
"""
import argparse
import itertools
import json
import os
import ssl
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

USAGE = {"input_tokens": 100, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


def sse(name, data):
    return ("event: %s\ndata: %s\n\n" % (name, json.dumps(data))).encode()


def assistant_messages(body):
    return sum(1 for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "assistant")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, args):
        super().__init__(("127.0.0.1", 0), Handler)
        self.script_path = args.script
        self.never_structured = args.never_structured
        self.log_path = args.log
        # message_start reports output_tokens 1, message_delta these.
        self.usage = dict(USAGE, output_tokens=20)
        self.usage.update(json.loads(args.usage) if args.usage else {})
        self.model = args.model
        self.honest = args.honest
        self.lock = threading.Lock()
        self.numbers = itertools.count(1)

    def log(self, entry):
        with self.lock, open(self.log_path, "a") as out:
            out.write(json.dumps(entry) + "\n")

    def load_script(self):
        # Read at every request, so a test may write it once it knows the port.
        if not self.script_path or not os.path.exists(self.script_path):
            return []
        with open(self.script_path) as f:
            return json.load(f)

    def blocks_for(self, turn):
        script = self.load_script()
        blocks = script[turn] if turn < len(script) else [{"text": "The script has no more turns."}]
        if self.never_structured:
            kept = [b for b in blocks if b.get("tool") != "StructuredOutput"]
            blocks = kept or [{"text": "I am finished."}]
        return blocks


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

    def send_json(self, status, value):
        out = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(out)
        self.close_connection = True

    def not_found(self):
        # "fake-api" marks every answer of ours that is not a model turn.
        self.send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": "fake-api: not here"}})

    def do_GET(self):
        self.server.log({"n": next(self.server.numbers), "method": self.command, "path": self.path, "turn": None,
                         "body": None, "headers": self.header_pairs()})
        self.not_found()

    do_HEAD = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_GET

    def do_POST(self):
        body = self.read_body()
        n = next(self.server.numbers)
        path = self.path.split("?")[0]
        turn = None
        if path.endswith("/count_tokens"):
            self.server.log({"n": n, "method": "POST", "path": self.path, "turn": None, "body": body,
                             "headers": self.header_pairs()})
            return self.send_json(200, {"input_tokens": 100})
        if not path.endswith("/v1/messages"):
            self.server.log({"n": n, "method": "POST", "path": self.path, "turn": None, "body": body,
                             "headers": self.header_pairs()})
            return self.not_found()
        if body.get("tools"):
            turn = assistant_messages(body)
            blocks = self.server.blocks_for(turn)
        else:
            blocks = [{"text": "Scripted session"}]
        self.server.log({"n": n, "method": "POST", "path": self.path, "turn": turn, "body": body,
                         "headers": self.header_pairs()})
        self.stream(body, n, turn, blocks)

    def stream(self, body, n, turn, blocks):
        output_tokens = self.server.usage["output_tokens"]
        if self.server.honest and isinstance(body.get("max_tokens"), int):
            output_tokens = min(output_tokens, body["max_tokens"])
        message_id = "msg_%03d_%s" % (n, uuid.uuid4().hex[:16])
        out = [sse("message_start", {"type": "message_start", "message": {
            "id": message_id, "type": "message", "role": "assistant", "model": self.server.model or body.get("model") or "claude-test",
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": dict(self.server.usage, output_tokens=1)}})]
        stop = "end_turn"
        for index, block in enumerate(blocks):
            if "tool" in block:
                stop = "tool_use"
                tool_id = "toolu_" + str(block.get("id") or "t%s_%d_%d" % (turn, index, n))
                out.append(sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": {
                    "type": "tool_use", "id": tool_id, "name": block["tool"], "input": {}}}))
                out.append(sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {
                    "type": "input_json_delta", "partial_json": json.dumps(block.get("input") or {})}}))
            else:
                out.append(sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": {
                    "type": "text", "text": ""}}))
                out.append(sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {
                    "type": "text_delta", "text": block.get("text", "")}}))
            out.append(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        out.append(sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                         "usage": {"output_tokens": output_tokens}}))
        out.append(sse("message_stop", {"type": "message_stop"}))
        data = b"".join(out)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("request-id", "req_%03d" % n)
        self.send_header("content-length", str(len(data)))
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        self.close_connection = True


def serve(args):
    server = Server(args)
    if args.tls_cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls_cert, args.tls_key)
        # The handshake happens in the handler's thread, so a client that
        # never completes it holds up no other.
        server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
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
                content = message.get("content") if isinstance(message, dict) else None
                if message.get("role") != "user" or not isinstance(content, list):
                    continue
                for block in content:
                    if not isinstance(block, dict) or block.get("type") != "tool_result":
                        continue
                    tool_id = block.get("tool_use_id", "")
                    if tool_id in seen:
                        continue
                    seen.add(tool_id)
                    print(json.dumps({"id": tool_id, "is_error": bool(block.get("is_error")),
                                      "text": text_of(block.get("content"))}))


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--port-file", required=True)
    s.add_argument("--log", required=True)
    s.add_argument("--script")
    s.add_argument("--never-structured", action="store_true")
    s.add_argument("--tls-cert")
    s.add_argument("--tls-key")
    s.add_argument("--usage")
    s.add_argument("--model")
    s.add_argument("--honest", action="store_true")
    r = sub.add_parser("results")
    r.add_argument("log")
    args = parser.parse_args()
    if args.command == "serve" and bool(args.tls_cert) != bool(args.tls_key):
        parser.error("--tls-cert and --tls-key go together")
    if args.command == "serve":
        serve(args)
    else:
        results(args)


if __name__ == "__main__":
    sys.exit(main())
