#!/usr/bin/env bash
# A session with the ach-redis binary on a throwaway 4-master cluster made by redis-cli on
# 127.0.0.1:7101-7104 (which must be free), in a temporary directory; the servers are
# children of this script, stopped by PID when it ends. Used for docs/redis.md:
#   cargo build -p ach-redis && B=target/debug/ach-redis crates/ach-redis/scripts/demo.sh
set -u
B=$(realpath "${B:-target/debug/ach-redis}")
cd "$(mktemp -d)"; PIDS=""
for p in 7101 7102 7103 7104; do
  mkdir -p n$p
  (cd n$p && exec redis-server --port $p --bind 127.0.0.1 --cluster-enabled yes --cluster-node-timeout 1000 --save '' --appendonly no --daemonize no --logfile redis.log --dir "$PWD") &
  PIDS="$PIDS $!"
done
trap 'kill $PIDS' EXIT
sleep 1
redis-cli --cluster create 127.0.0.1:7101 127.0.0.1:7102 127.0.0.1:7103 127.0.0.1:7104 --cluster-yes > create.log 2>&1
# Hash-tagged keys: 3 slots of ~1000 keys on each of 7101-7103, 24 on 7104.
V=$(head -c 400 /dev/zero | tr '\0' 'v')
declare -A want=([0]=3 [1]=3 [2]=3 [3]=24)
for i in $(seq 0 400); do
  slot=$(redis-cli -p 7101 cluster keyslot "t$i"); node=$((slot / 4096))
  [ "${want[$node]}" -gt 0 ] || continue
  want[$node]=$((want[$node] - 1))
  redis-benchmark -p $((7101 + node)) -n 1000 -r 1000000 -c 4 -q SET "{t$i}:__rand_int__" "$V" > /dev/null 2>&1
done
echo '$ ach-redis status --cluster 127.0.0.1:7101 --memory-capacity-mb 14'
$B status --cluster 127.0.0.1:7101 --memory-capacity-mb 14
echo '$ ach-redis plan --cluster 127.0.0.1:7101 --memory-capacity-mb 14'
$B plan --cluster 127.0.0.1:7101 --memory-capacity-mb 14 | sed -n '/^ACH:/,$p'
echo '$ ach-redis rebalance --cluster 127.0.0.1:7101 --memory-capacity-mb 14 --steps 8 --interval-ms 500 --m-max 0.1 --m-horizon 1 --horizon 10 --log steps.jsonl'
$B rebalance --cluster 127.0.0.1:7101 --memory-capacity-mb 14 --steps 8 --interval-ms 500 --m-max 0.1 --m-horizon 1 --horizon 10 --log steps.jsonl 2>&1 | grep -v 'notable slot'
echo '$ ach-redis status --cluster 127.0.0.1:7101 --memory-capacity-mb 14'
$B status --cluster 127.0.0.1:7101 --memory-capacity-mb 14
echo '$ redis-cli --cluster check 127.0.0.1:7101'
redis-cli --cluster check 127.0.0.1:7101 | grep -E '^\S*\[(OK|ERR|WARNING)' | sed 's/\x1b\[[0-9;]*m//g'
