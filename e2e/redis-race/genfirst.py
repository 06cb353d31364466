#!/usr/bin/env python3
"""Generation-first flows, one at a time: the generation request (x-disagg-order: concurrent) goes
first; the context request follows DELAY_MS later, while the generation response's usage waits for it.

usage: genfirst.py CONTEXT_PORT GENERATION_PORT FLOWS DELAY_MS   (STREAM=0: a JSON generation body)
"""
import collections
import http.client
import json
import os
import sys
import threading
import time
import uuid

STREAM = os.environ.get("STREAM", "1") == "1"
ctx_port, gen_port, flows, delay = (int(a) for a in sys.argv[1:5])
MESSAGES = [{"role": "user", "content": "hello"}]


def post(port, rid, body, extra_headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"content-type": "application/json", "x-request-id": rid, **(extra_headers or {})}
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body), headers=headers)
    return conn.getresponse().read().decode()


def generation(rid, out):
    body = {"model": "demo-model", "messages": MESSAGES, "stream": STREAM,
            "kv_transfer_params": {"do_remote_prefill": True}}
    if STREAM:
        body["stream_options"] = {"include_usage": True}
    out["gen"] = post(gen_port, rid, body, {"x-disagg-order": "concurrent"})


def usage_of(text):
    if not STREAM:
        return json.loads(text).get("usage")
    return [json.loads(line[6:]) for line in text.split("\n") if line.startswith("data: {")][-1].get("usage")


counts = collections.Counter()
for _ in range(flows):
    rid = str(uuid.uuid4())
    out = {}
    t = threading.Thread(target=generation, args=(rid, out))
    t.start()
    time.sleep(delay / 1000.0)
    post(ctx_port, rid, {"model": "demo-model", "messages": MESSAGES, "max_tokens": 1,
                         "kv_transfer_params": {"do_remote_decode": True}})
    t.join()
    usage = usage_of(out["gen"])
    cached = usage and usage["prompt_tokens_details"]["cached_tokens"]
    counts[{32: "corrected", 99: "uncorrected"}.get(cached, "other")] += 1
print(json.dumps(dict(counts)))
