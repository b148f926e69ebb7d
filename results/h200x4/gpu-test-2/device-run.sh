#!/usr/bin/env bash
# 4xH200: the NVLink ceiling, then ci/gpu-test with the bundled binaries (bounded).
set -u
B=.bundle; W=/tmp/g; rm -rf $W; mkdir -p $W/gpu-test
export NCCL_NVLS_ENABLE=0
t0=$(date +%s)
$B/ginbench ceiling -b 256M -n 10 -w 2 -J $W/ceiling.json > $W/ceiling.txt 2>&1; echo "ceiling rc=$?" | tee -a $W/summary.txt
GINBENCH_BIN=$B timeout -s KILL 400 ci/gpu-test $W/gpu-test > $W/gpu-test.log 2>&1; echo "gpu-test rc=$? in $(( $(date +%s) - t0 )) s" | tee -a $W/summary.txt
cat $W/gpu-test.log >> $W/summary.txt
tar czf $OUT/g.tgz -C /tmp g
cp $W/summary.txt $OUT/
