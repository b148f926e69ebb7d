#!/usr/bin/env bash
# Where the loopback backend's time goes (results/h200x2/gin-loopback/where-time-goes).
set -u
b=${GINBENCH_BIN:-target/release}
W=${1:-.}
export NCCL_NVLS_ENABLE=0 GINBENCH_LOOPBACK_STATS=1

CUDA_DEVICE_MAX_CONNECTIONS=32 timeout 120 $b/ginbench-loopback-gpu-smoke $b/libnccl-net-ginbench.so > $W/smoke.txt 2>&1; echo "smoke rc=$?"; grep -E "rate|bandwidth|passed|failed" $W/smoke.txt
run() { local tag=$1; shift; local s=$SECONDS; timeout -s KILL 120 "$@" -J $W/$tag.json > $W/$tag.txt 2>&1; echo "$tag rc=$? $((SECONDS-s))s"; grep -E "^ +[0-9]|stats at" $W/$tag.txt | sort -u | grep -v " 0 ops" | head -12; }
for v in 8 24; do
  run ll_V$v $b/ep_perf -g 2 -D gin --gin-backend loopback --mode ll -b 64 -e 256 -f 4 -d bf16 -n 5 -w 1 -V $v -T 100
done

