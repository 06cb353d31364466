#!/usr/bin/env python3
"""For each generation exchange that passed through without context usage, what happened to its context
exchange (from the replicas' DEBUG summary lines). usage: attribute.py RUN_DIR"""
import re, sys, collections, glob
ctx, gen = {}, []
for f in glob.glob(sys.argv[1] + "/replica*.log"):
    for line in open(f):
        m = re.search(r"exchange phase=(\w+) outcome=(\w+) key=(\S+) .* duration_ms=(\d+)", line)
        if not m:
            continue
        phase, outcome, key, ms = m.groups()
        if phase == "context":
            ctx[key] = (outcome, int(ms), f.split("/")[-1])
        elif outcome == "passthrough_no_context":
            gen.append(key)
print("generation passthrough_no_context:", len(gen), "; context exchanges logged:", len(ctx))
summary = collections.Counter()
for key in gen:
    c = ctx.get(key)
    summary[c[0] if c else "no context line"] += 1
    print(" ", key[:40], "context:", c)
print(dict(summary))
