#!/usr/bin/env bash
# A session with `--telemetry prometheus` and `--metrics-addr` on a throwaway 3-master cluster
# (redis-server on 127.0.0.1:7201-7203), one redis_exporter per master (127.0.0.1:9201-9203,
# each target labelled with its master's address as `instance`) and a Prometheus scraping them
# every second (127.0.0.1:9290); ports 7201-7203, 9201-9203, 9290 and 9464 must be free. Every
# server is a child of this script in a temporary directory, stopped by PID when it ends.
# Used for docs/prometheus.md:
#   cargo build -p ach-redis && B=target/debug/ach-redis crates/ach-redis/scripts/prometheus_demo.sh
set -u
B=$(realpath "${B:-target/debug/ach-redis}")
cd "$(mktemp -d)"; PIDS=""
trap 'kill $PIDS 2>/dev/null' EXIT
for p in 7201 7202 7203; do
  mkdir -p n$p
  (cd n$p && exec redis-server --port $p --bind 127.0.0.1 --cluster-enabled yes --cluster-node-timeout 1000 --save '' --appendonly no --daemonize no --logfile redis.log --dir "$PWD") &
  PIDS="$PIDS $!"
done
sleep 1
redis-cli --cluster create 127.0.0.1:7201 127.0.0.1:7202 127.0.0.1:7203 --cluster-yes > create.log 2>&1
for i in 1 2 3; do
  prometheus-redis-exporter -redis.addr redis://127.0.0.1:720$i -include-system-metrics \
    -web.listen-address 127.0.0.1:920$i > exporter$i.log 2>&1 &
  PIDS="$PIDS $!"
done
cat > prometheus.yml <<'EOF'
global: { scrape_interval: 1s, evaluation_interval: 1s }
scrape_configs:
  - job_name: redis
    static_configs:
      - targets: ["127.0.0.1:9201"]
        labels: { instance: "127.0.0.1:7201" }
      - targets: ["127.0.0.1:9202"]
        labels: { instance: "127.0.0.1:7202" }
      - targets: ["127.0.0.1:9203"]
        labels: { instance: "127.0.0.1:7203" }
  - job_name: ach-redis
    static_configs:
      - targets: ["127.0.0.1:9464"]
EOF
prometheus --config.file=prometheus.yml --storage.tsdb.path=data \
  --web.listen-address=127.0.0.1:9290 > prometheus.log 2>&1 &
PIDS="$PIDS $!"
# About 100 keys of 100 bytes in each of 300 slots (hash tags {t0}..{t299}), each written to
# its slot's owner; then a GET load for the whole session.
V=$(head -c 100 /dev/zero | tr '\0' 'v')
for i in $(seq 0 299); do
  slot=$(redis-cli -p 7201 cluster keyslot "t$i")
  port=$((7201 + slot * 3 / 16384))
  redis-benchmark -p $port -n 100 -r 1000000 -c 2 -q SET "{t$i}:__rand_int__" "$V" > /dev/null 2>&1
done
redis-benchmark -p 7201 --cluster -n 100000000 -c 4 -q -t get > /dev/null 2>&1 &
PIDS="$PIDS $!"
sleep 15
T="--telemetry prometheus --prometheus-url http://127.0.0.1:9290 --prometheus-window-s 10"
echo "\$ ach-redis status --cluster 127.0.0.1:7201 $T"
$B status --cluster 127.0.0.1:7201 $T
echo "\$ ach-redis rebalance --cluster 127.0.0.1:7201 --algorithm static-wt --weight 127.0.0.1:7201=3 --steps 6 --interval-ms 2000 --metrics-addr 127.0.0.1:9464 $T"
$B rebalance --cluster 127.0.0.1:7201 --algorithm static-wt --weight 127.0.0.1:7201=3 \
  --steps 6 --interval-ms 2000 --metrics-addr 127.0.0.1:9464 $T > rebalance.out 2>&1 &
R=$!
sleep 7
echo "\$ curl -s http://127.0.0.1:9464/metrics | grep -Ev '^# (HELP|TYPE)|_bucket'   # during the rebalance"
curl -s http://127.0.0.1:9464/metrics | grep -Ev '^# (HELP|TYPE)|_bucket'
echo "\$ curl -s 'http://127.0.0.1:9290/api/v1/query?query=ach_keys_moved_total'   # Prometheus's view"
curl -s 'http://127.0.0.1:9290/api/v1/query?query=ach_keys_moved_total'; echo
wait $R
echo '(the rebalance:)'
cat rebalance.out
echo '$ redis-cli --cluster check 127.0.0.1:7201'
redis-cli --cluster check 127.0.0.1:7201 | grep -E '^\S*\[(OK|ERR|WARNING)' | sed 's/\x1b\[[0-9;]*m//g'
