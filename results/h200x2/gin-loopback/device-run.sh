#!/usr/bin/env bash
# Device run: ci/gpu-test on this node with the bundled binaries, then the loopback controls.
set -u
B=.bundle; W=/tmp/g; mkdir -p $W
export NCCL_NVLS_ENABLE=0
nvidia-smi -L > $W/gpus.txt
n=$(grep -c '^GPU' $W/gpus.txt)
t0=$(date +%s)
GINBENCH_BIN=$B timeout 450 ci/gpu-test $W > $W/gpu-test.log 2>&1; echo "gpu-test rc=$? in $(( $(date +%s) - t0 )) s" | tee -a $W/summary.txt
cat $W/gpu-test.log >> $W/summary.txt
# Negative control: a signal visible before its put must make the checks report wrong data.
GINBENCH_LOOPBACK_BREAK=signal-early timeout 60 $B/alltoall_perf -g $n -D gin -R 2 -b 1M -e 16M -f 4 -n 5 -w 1 --gin-backend loopback -J $W/loopback_negative.json > $W/loopback_negative.txt 2>&1; echo "negative control rc=$? (7 = wrong data expected)" | tee -a $W/summary.txt
for seed in 1 2 3; do
  GINBENCH_LOOPBACK_CHAOS=$seed timeout 60 $B/alltoall_perf -g $n -D gin,hybrid -R 2 -b 8 -e 16M -f 16 -n 5 -w 1 --gin-backend loopback -J $W/loopback_chaos$seed.json > $W/loopback_chaos$seed.txt 2>&1; echo "chaos $seed rc=$?" | tee -a $W/summary.txt
done
# LL then HT in one process (HT alone passes).
timeout 90 $B/ep_perf -g $n -D gin --gin-backend loopback --mode ll,ht -b 64 -e 64 -n 5 -w 1 -J $W/loopback_ep_ll_then_ht.json > $W/loopback_ep_ll_then_ht.txt 2>&1; echo "ep ll,ht in one process rc=$?" | tee -a $W/summary.txt
echo "total $(( $(date +%s) - t0 )) s" | tee -a $W/summary.txt
tar czf $OUT/g.tgz -C /tmp g
cp $W/summary.txt $OUT/
