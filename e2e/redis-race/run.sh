#!/usr/bin/env bash
# Two service replicas on one redis-server behind a real Envoy running the shipped deploy/envoy/envoy.yaml
# (rewritten to loopback ports), a vLLM-shaped worker per pool and a closed-loop orchestrator; prints what
# the client got, the replicas' outcome counters and Envoy's ext_proc stats. See README.md.
#
# usage: e2e/redis-race/run.sh JAR ENVOY_BINARY SECONDS OUT_DIR
# env:   BASE (31000)        ports BASE+101/102 Envoy listeners, +201/202 workers, +301/302 replicas (gRPC),
#                            +391/392 replicas (admin), +379 redis, +901 Envoy admin
#        CONCURRENCY (8)     closed-loop flows
#        CLOSE=1             the orchestrator opens a connection per call and closes it once it has the body
#        GAP_P (0.5) GAP_MS (3)   the share of worker responses whose body comes GAP_MS after the headers
#        FRAMING (length)    worker JSON bodies with content-length (as vLLM) or chunked
#        GENFIRST=N          instead of the closed loop: N generation-first flows, context DELAY_MS (300) later
#        STREAM (1)          with GENFIRST: the generation response is SSE (1) or JSON (0)
#        JAVA_OPTS           e.g. -Dlogback.configurationFile=e2e/redis-race/logback-summary.xml (per-exchange
#                            lines for attribute.py)
#        EXTPROC_LOG (info)  Envoy's ext_proc log level
set -u
JAR=$1; ENVOY=$2; SECS=$3; D=$4
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
B=${BASE:-31000}
mkdir -p "$D"; : >"$D/pids"
cleanup() { for p in $(tac "$D/pids"); do kill "$p" 2>/dev/null; done; }
trap cleanup EXIT
python3 "$HERE/envoy_config.py" "$ROOT/deploy/envoy/envoy.yaml" "$D/envoy.yaml" "$B"
redis-server --port $((B + 379)) --bind 127.0.0.1 --save '' --appendonly no >"$D/redis.log" 2>&1 & echo $! >>"$D/pids"
python3 "$HERE/worker.py" $((B + 201)) context >"$D/worker-context.log" 2>&1 & echo $! >>"$D/pids"
python3 "$HERE/worker.py" $((B + 202)) generation >"$D/worker-generation.log" 2>&1 & echo $! >>"$D/pids"
for i in 1 2; do
  # shellcheck disable=SC2086
  java -Xmx256m ${JAVA_OPTS:-} -jar "$JAR" --grpc-port $((B + 300 + i)) --admin-port $((B + 390 + i)) \
    --set store.type=redis --set store.redis_uri=redis://127.0.0.1:$((B + 379)) \
    --set classification.context_clusters=context --set classification.generation_clusters=generation \
    >"$D/replica$i.log" 2>&1 & echo $! >>"$D/pids"
done
for i in 1 2; do until curl -sf localhost:$((B + 390 + i))/readyz >/dev/null; do sleep 0.5; done; done
"$ENVOY" -c "$D/envoy.yaml" --base-id "$B" --component-log-level "ext_proc:${EXTPROC_LOG:-info}" \
  >"$D/envoy.log" 2>&1 & echo $! >>"$D/pids"
until curl -sf localhost:$((B + 901))/ready >/dev/null; do sleep 0.5; done
sleep 6 # Envoy's gRPC health checks mark both replicas healthy
curl -s localhost:$((B + 901))/clusters | grep 'disagg_usage_extproc.*health_flags'
if [ -n "${GENFIRST:-}" ]; then
  python3 "$HERE/genfirst.py" $((B + 101)) $((B + 102)) "$GENFIRST" "${DELAY_MS:-300}" | tee "$D/client.json"
else
  python3 "$HERE/client.py" $((B + 101)) $((B + 102)) "${CONCURRENCY:-8}" "$SECS" | tee "$D/client.json"
fi
sleep 1
for i in 1 2; do
  curl -s localhost:$((B + 390 + i))/metrics | grep -E '^disagg_usage_(exchanges_total|store_errors_total)' | sed "s/^/replica$i /"
done | tee "$D/metrics.txt"
curl -s localhost:$((B + 901))/stats \
  | grep -E 'ext_proc\.(stream_msgs|override_message|message_timeouts|failure_mode)' | tee "$D/envoy-stats.txt"
