#!/usr/bin/env bash
# The runs of README.md: each (smoke test, plugin) pair three times with --processes 2.
# usage: ab.sh NEW_SMOKE NEW_LIB OLD_SMOKE OLD_LIB OUTDIR   (NEW: b7b4865's build, OLD: 93a733e's)
new_smoke=$1 new_lib=$2 old_smoke=$3 old_lib=$4 out=$5
for i in 1 2 3; do
  for combo in "new $new_smoke $new_lib" "old $old_smoke $old_lib" "oldsmoke-newlib $old_smoke $new_lib"; do
    set -- $combo
    timeout 120 "$2" "$3" --processes 2 > "$out/$1-$i.txt" 2>&1
    echo "$1 run $i: rc=$? $(tail -1 "$out/$1-$i.txt")"
  done
done
