#!/usr/bin/env bash
# Loopback GIN, ranks as threads: the gin / hybrid sweeps, chaos seeds, faults; the NVLink ceiling.
set -u
B=.bundle; W=/tmp/g; rm -rf $W; mkdir -p $W
export NCCL_NVLS_ENABLE=0
n=$(nvidia-smi -L | grep -c '^GPU')
S=$W/summary.txt
run() { # name timeout cmd...
  local name=$1 to=$2; shift 2
  local t0=$(date +%s)
  echo "\$ $*" > $W/$name.txt
  timeout -s KILL $to "$@" >> $W/$name.txt 2>&1; local rc=$?
  echo "$name rc=$rc in $(( $(date +%s) - t0 )) s: $(grep -c '^ ' $W/$name.txt) data lines, wrong: $(grep -E '^ +[0-9]' $W/$name.txt | awk '{s+=$9; if (NF>=15) s+=$15} END {print s+0}')" | tee -a $S
}
run ceiling 60 $B/ginbench ceiling -b 256M -n 20 -w 3 -J $W/ceiling.json
run a2a 120 $B/alltoall_perf -g $n -D gin,hybrid -R 2 -b 8 -e 2G -f 4 --gin-backend loopback -T 100 -J $W/a2a.json
run a2a_graph 120 $B/alltoall_perf -g $n -D gin,hybrid -R 2 -b 8 -e 2G -f 4 -G 1 --gin-backend loopback -T 100 -J $W/a2a_graph.json
run ep_ll 150 $B/ep_perf -g $n -D gin,hybrid --gin-backend loopback --mode ll -b 1 -e 256 -f 4 -d bf16,fp8 -n 5 -w 2 -T 120 -J $W/ep_ll.json
run ep_ht 120 $B/ep_perf -g $n -D gin,hybrid --gin-backend loopback --mode ht -b 512 -e 4096 -f 2 -d bf16,fp8 -n 5 -w 2 -T 100 -J $W/ep_ht.json
for seed in 1 2 3; do
  GINBENCH_LOOPBACK_CHAOS=$seed run ep_chaos$seed 60 $B/ep_perf -g $n -D gin --gin-backend loopback --mode ll,ht -b 64 -e 64 -d bf16 -n 3 -w 1 -T 50 -J $W/ep_chaos$seed.json
done
GINBENCH_LOOPBACK_CHAOS=banana run fault_env 30 $B/alltoall_perf -g $n -D gin -R 2 -b 8 -e 8 --gin-backend loopback -T 20
tar czf $OUT/g.tgz -C /tmp g
cp $S $OUT/
