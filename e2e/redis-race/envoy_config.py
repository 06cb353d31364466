#!/usr/bin/env python3
"""Rewrites the shipped deploy/envoy/envoy.yaml for one machine: loopback ports from BASE, the two
worker pools on local workers, and two service replicas as endpoints of the ext_proc cluster.

usage: envoy_config.py SHIPPED_YAML OUT_YAML BASE
"""
import sys

src, out, base = sys.argv[1], sys.argv[2], int(sys.argv[3])
t = open(src).read()
for old, new in [
    ("port_value: 9901", f"port_value: {base + 901}"),
    ("address: 0.0.0.0, port_value: 10001", f"address: 127.0.0.1, port_value: {base + 101}"),
    ("address: 0.0.0.0, port_value: 10002", f"address: 127.0.0.1, port_value: {base + 102}"),
    ("address: context-workers, port_value: 8000", f"address: 127.0.0.1, port_value: {base + 201}"),
    ("address: generation-workers, port_value: 8000", f"address: 127.0.0.1, port_value: {base + 202}"),
]:
    assert old in t, old
    t = t.replace(old, new)
one = "        - endpoint:\n            address:\n              socket_address: { address: 127.0.0.1, port_value: 9002 }\n"
assert one in t
t = t.replace(one, one.replace("9002", str(base + 301)) + one.replace("9002", str(base + 302)))
open(out, "w").write(t)
