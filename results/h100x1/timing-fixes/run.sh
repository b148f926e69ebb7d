#!/usr/bin/env bash
# A/B of the old (b2ae835) and new builds on one GPU: interference start, -m rotation, -C, -G capture.
cd "$(dirname "$0")" || exit 2
for p in old release; do tar xJf $p.tar.xz; done
mv release new
export NCCL_NVLS_ENABLE=0
I=(-g 1 --fg alltoall -D host,nvl -R 2 --size 8K,2M -b 1M -e 64M -f 8 -T 120)
E=(-g 1 --fg ep -D nvl --mode ll -b 1M -e 64M -f 8 -T 120)
for round in 1 2 3; do
  for v in old new; do
    $v/interference_perf "${I[@]}" -J $OUT/i_a2a_${v}_$round.json > $OUT/i_a2a_${v}_$round.txt 2>&1; echo "i_a2a $v $round: $?"
    $v/interference_perf "${E[@]}" -J $OUT/i_ep_${v}_$round.json > $OUT/i_ep_${v}_$round.txt 2>&1; echo "i_ep $v $round: $?"
    $v/alltoall_perf -g 1 -D nvl,host -R 2 -b 256K -e 8M -f 2 -m 8 -N 2 -T 120 -J $OUT/m8_${v}_$round.json > $OUT/m8_${v}_$round.txt 2>&1; echo "m8 $v $round: $?"
  done
done
for v in old new; do
  $v/alltoall_perf -g 1 -D nvl -R 2 -b 32M -e 2G -f 4 -C 1 -T 120 -J $OUT/c1_$v.json > $OUT/c1_$v.txt 2>&1; echo "c1 $v: $?"
done
nsys=$(command -v nsys || find / -name nsys -type f -perm -u+x 2>/dev/null | head -1)
echo "nsys: $nsys"
for v in old new; do
  (cd /tmp && timeout 200 "$nsys" profile --capture-range=cudaProfilerApi --capture-range-end=stop -t cuda,nvtx -o /tmp/g_$v -f true \
    "$OLDPWD/$v/alltoall_perf" -g 1 -D nvl -R 2 -b 1M -e 4M -f 2 -G 3 --profile-size 2M -T 120) > $OUT/nsys_G_$v.txt 2>&1
  echo "nsys G $v: $?"; ls -la /tmp/g_$v* >> $OUT/nsys_G_$v.txt 2>&1
done
cd $OUT && tar czf all.tgz *.json *.txt && rm -f *.json *.txt
