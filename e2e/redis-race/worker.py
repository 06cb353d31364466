#!/usr/bin/env python3
"""A trivial vLLM-shaped worker over HTTP/1.1. The context leg answers with kv_transfer_params and the
prefill's usage (prompt 100, cached 32); the generation leg with the decode worker's wrong count (cached 99),
as JSON or, when the request streams, as SSE (a content event, the usage event, [DONE]).

A JSON body follows its headers GAP_P of the time GAP_MS later, with content-length (FRAMING=length, as
vLLM's JSONResponse) or as one chunk and then the terminating chunk in a write of its own
(FRAMING=chunked). SSE is chunked, one chunk per event then the terminating chunk (as uvicorn), each
GAP_P of the time GAP_MS after the one before.

usage: worker.py PORT context|generation
"""
import json
import os
import random
import socket
import socketserver
import sys
import time

PROMPT = 100
CONTEXT_CACHED = 32
WRONG_CACHED = 99
GAP_MS = float(os.environ.get('GAP_MS', '3'))
GAP_P = float(os.environ.get('GAP_P', '0.5'))
FRAMING = os.environ.get('FRAMING', 'length')


def read_request(rfile):
    line = rfile.readline()
    if not line:
        return None
    headers = {}
    while True:
        h = rfile.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        k, _, v = h.decode("latin-1").partition(":")
        headers[k.strip().lower()] = v.strip()
    body = b""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int(rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                rfile.readline()
                break
            body += rfile.read(size)
            rfile.readline()
    elif "content-length" in headers:
        body = rfile.read(int(headers["content-length"]))
    return line.decode("latin-1").split(" ")[1], headers, body


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            req = read_request(self.rfile)
            if req is None:
                return
            path, headers, body = req
            if path == "/health":
                self.connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                continue
            doc = {
                "id": "chatcmpl-" + headers.get("x-request-id", "x"),
                "object": "chat.completion",
                "created": int(time.time()),
                "model": "demo-model",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                             "finish_reason": "length"}],
            }
            if ROLE == "context":
                doc["usage"] = {"prompt_tokens": PROMPT, "total_tokens": PROMPT + 1, "completion_tokens": 1,
                                "prompt_tokens_details": {"cached_tokens": CONTEXT_CACHED}}
                doc["kv_transfer_params"] = {"do_remote_prefill": True, "do_remote_decode": False,
                                             "remote_engine_id": "e1", "remote_block_ids": [1, 2, 3],
                                             "remote_host": "127.0.0.1", "remote_port": 5600}
            else:
                doc["usage"] = {"prompt_tokens": PROMPT, "total_tokens": PROMPT + 12, "completion_tokens": 12,
                                "prompt_tokens_details": {"cached_tokens": WRONG_CACHED}}
            data = json.dumps(doc).encode()
            if ROLE == "generation" and b'"stream": true' in body:
                doc["object"] = "chat.completion.chunk"
                usage = doc.pop("usage")
                events = [dict(doc, choices=[{"index": 0, "delta": {"content": "ok"}, "finish_reason": None}]),
                          dict(doc, choices=[], usage=usage)]
                parts = [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events] + [b"data: [DONE]\n\n"]
                self.connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                                        b"transfer-encoding: chunked\r\n\r\n")
                for part in parts:
                    if random.random() < GAP_P:
                        time.sleep(GAP_MS / 1000.0)
                    self.connection.sendall(b"%x\r\n%s\r\n" % (len(part), part))
                if random.random() < GAP_P:
                    time.sleep(GAP_MS / 1000.0)
                self.connection.sendall(b"0\r\n\r\n")
                continue
            if FRAMING == "chunked":
                head, body, end = b"transfer-encoding: chunked", b"%x\r\n%s\r\n" % (len(data), data), b"0\r\n\r\n"
            else:  # what vLLM's JSONResponse sends
                head, body, end = b"content-length: %d" % len(data), data, b""
            self.connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n" + head + b"\r\n\r\n")
            if random.random() < GAP_P:
                time.sleep(GAP_MS / 1000.0)  # the body comes a moment after the headers
            self.connection.sendall(body)
            if end:
                if random.random() < GAP_P:
                    time.sleep(GAP_MS / 1000.0)  # the terminating chunk comes a moment later
                self.connection.sendall(end)


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


if __name__ == "__main__":
    ROLE = sys.argv[2]
    Server(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
