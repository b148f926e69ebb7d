#!/usr/bin/env bash
# Final 2xH200 run: negative controls (threads and virtual nodes), virtual-node sweeps sized to finish,
# the ceiling, and interference_perf's alltoall sections.
set -u
B=.bundle; W=/tmp/g; rm -rf $W; mkdir -p $W
export NCCL_NVLS_ENABLE=0
n=$(nvidia-smi -L | grep -c '^GPU')
S=$W/summary.txt
M="mpirun --allow-run-as-root -np $n -x NCCL_NVLS_ENABLE -x GINBENCH_LOOPBACK_CHAOS -x GINBENCH_LOOPBACK_BREAK"
run() { # name timeout cmd...
  local name=$1 to=$2; shift 2
  local t0=$(date +%s)
  echo "\$ $*" > $W/$name.txt
  timeout -s KILL $to "$@" >> $W/$name.txt 2>&1; local rc=$?
  echo "$name rc=$rc in $(( $(date +%s) - t0 )) s" | tee -a $S
}
export GINBENCH_LOOPBACK_BREAK=signal-early
run neg_ll 40 $B/ep_perf -g $n -D gin --gin-backend loopback --mode ll -b 16 -e 16 -n 3 -w 1 -T 30 -J $W/neg_ll.json
run neg_ht 40 $B/ep_perf -g $n -D gin --gin-backend loopback --mode ht -b 512 -e 512 -n 3 -w 1 -T 30 -J $W/neg_ht.json
run neg_a2a 40 $B/alltoall_perf -g $n -D gin -R 2 -b 1M -e 16M -f 4 -n 3 -w 1 --gin-backend loopback -T 30 -J $W/neg_a2a.json
run vn_neg_ep 60 $M $B/ep_perf -D gin --mode ll -b 16 -e 16 -n 2 -w 1 --gin-backend loopback --emulate-nodes $n -T 50 -J $W/vn_neg_ep.json
unset GINBENCH_LOOPBACK_BREAK
run vn_a2a 100 $M $B/alltoall_perf -D host,gin,hybrid -R 2 -b 8 -e 8M -f 8 -n 3 -w 1 --gin-backend loopback --emulate-nodes $n -T 90 -J $W/vn_a2a.json
run vn_ep_ll 80 $M $B/ep_perf -D host,gin,hybrid --mode ll -b 1 -e 16 -f 16 -d bf16,fp8 -n 2 -w 1 --gin-backend loopback --emulate-nodes $n -T 70 -J $W/vn_ep_ll.json
run vn_ep_ht 80 $M $B/ep_perf -D host,gin,hybrid --mode ht -b 512 -e 512 -d bf16,fp8 -n 2 -w 1 --gin-backend loopback --emulate-nodes $n -T 70 -J $W/vn_ep_ht.json
GINBENCH_LOOPBACK_CHAOS=1 run vn_chaos1 60 $M $B/ep_perf -D gin --mode ll -b 16 -e 16 -n 2 -w 1 --gin-backend loopback --emulate-nodes $n -T 50 -J $W/vn_chaos1.json
run i_a2a 60 $B/interference_perf -g $n --fg alltoall -D nvl -R 2 --size 2M,128M --ep $n --dp $n -b 1M -e 64M -f 8 -T 50 -J $W/i_a2a.json
tar czf $OUT/g.tgz -C /tmp g
cp $S $OUT/
