#!/usr/bin/env bash
# OLD=<release binaries of 325da76> NEW=<release binaries of 238430e> OUT=<folder> run.sh
# (each binaries folder holds alltoall_perf, ep_perf, interference_perf, ginbench and
# libnccl-net-ginbench.so)
export NCCL_NVLS_ENABLE=0
W=$OUT/w; mkdir -p $W
run() { # name bin args...
  local name=$1; shift
  echo "## $name: $*" >> $W/commands.txt
  timeout 240 "$@" > $W/$name.txt 2>&1; echo "$name rc=$?" | tee -a $W/rc.txt
}
for v in old new; do
  b=$OLD; [ $v = new ] && b=$NEW
  run ht_experts16384_$v $b/ep_perf -g 1 -D nvl,host --mode ht --experts 16384 -b 256 -e 256 -T 60 -J $W/ht_experts16384_$v.json
done
b=$NEW
run ep_all_new $b/ep_perf -g 1 -D nvl,host --mode ll,ht -d bf16,fp8 -b 1 -e 4096 -f 4 -T 120 -J $W/ep_all_new.json
run ep_graph_new $b/ep_perf -g 1 -D nvl --mode ll,ht -b 1 -e 256 -f 16 -G 3 -T 60 -J $W/ep_graph_new.json
run a2a_ll_new $b/alltoall_perf -g 1 -D nvl-ll,nvl-ll128,auto -R 2 -b 8 -e 1M -f 4 -T 60 -J $W/a2a_ll_new.json
run a2a_ll_graph_new $b/alltoall_perf -g 1 -D nvl-ll,nvl-ll128 -R 2 -b 8 -e 64K -f 4 -G 3 -T 60 -J $W/a2a_ll_graph_new.json
for v in old new; do
  b=$OLD; [ $v = new ] && b=$NEW
  run ht_gin_experts16384_$v $b/ep_perf -g 1 -D gin --gin-backend loopback --mode ht --experts 16384 -b 64 -e 64 -n 2 -w 1 -T 120 -J $W/ht_gin_experts16384_$v.json
done
b=$NEW
run ifr_V100_new $b/interference_perf -g 1 --fg ep -D nvl --mode ll --tokens 1 -V 100 -b 1M -e 1M -T 60
run ifr_V124_dp8_new $b/interference_perf -g 1 --fg ep -D nvl --mode ll --tokens 16 -V 124 --dp-max-ctas 8 -b 1M -e 4M -f 4 -T 120 -J $W/ifr_V124_dp8_new.json
run ifr_V68_new $b/interference_perf -g 1 --fg ep -D nvl --mode ll --tokens 16 -V 68 -b 1M -e 1M -T 120 -J $W/ifr_V68_new.json
