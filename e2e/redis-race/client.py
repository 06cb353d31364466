#!/usr/bin/env python3
"""Closed-loop orchestrator: each worker thread runs context then generation through Envoy, like a
vLLM P/D proxy (same X-Request-Id on both legs, kv_transfer_params on each leg).

usage: client.py CONTEXT_PORT GENERATION_PORT CONCURRENCY SECONDS   (CLOSE=1: a new connection per call)
"""
import collections
import http.client
import json
import os
import sys
import threading
import time
import uuid

ctx_port, gen_port, conc, seconds = (int(a) for a in sys.argv[1:5])
counts = collections.Counter()
lock = threading.Lock()
deadline = time.time() + seconds
CLOSE = os.environ.get('CLOSE') == '1'


def post(conn, rid, body):
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body),
                 headers={"content-type": "application/json", "x-request-id": rid})
    resp = conn.getresponse()
    out = resp.status, resp.read()
    if CLOSE:
        conn.close()  # a client without a connection pool: the socket closes once the body is read
    return out


def loop():
    cc = http.client.HTTPConnection("127.0.0.1", ctx_port, timeout=10)
    gc = http.client.HTTPConnection("127.0.0.1", gen_port, timeout=10)
    while time.time() < deadline:
        rid = str(uuid.uuid4())
        msgs = [{"role": "user", "content": "hello"}]
        try:
            st, raw = post(cc, rid, {"model": "demo-model", "messages": msgs, "max_tokens": 1, "stream": False,
                                     "kv_transfer_params": {"do_remote_decode": True, "do_remote_prefill": False}})
            kv = json.loads(raw)["kv_transfer_params"]
            st, raw = post(gc, rid, {"model": "demo-model", "messages": msgs, "max_tokens": 12, "stream": False,
                                     "kv_transfer_params": dict(kv, do_remote_decode=False, do_remote_prefill=True)})
        except Exception as e:  # noqa: BLE001
            with lock:
                counts["error:" + type(e).__name__] += 1
            cc.close()
            gc.close()
            cc = http.client.HTTPConnection("127.0.0.1", ctx_port, timeout=10)
            gc = http.client.HTTPConnection("127.0.0.1", gen_port, timeout=10)
            continue
        try:
            cached = json.loads(raw)["usage"]["prompt_tokens_details"]["cached_tokens"]
            key = {32: "corrected", 99: "uncorrected"}.get(cached, "cached=%s" % cached)
        except Exception:  # noqa: BLE001
            key = "broken_generation_body"
        with lock:
            counts[key] += 1


threads = [threading.Thread(target=loop) for _ in range(conc)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(dict(counts), sort_keys=True))
