# Sourced by the ci/gpu-* scripts: the repository root as working folder, the binaries ($bin, from
# $GINBENCH_BIN, default target/release), this node's GPU count ($n; exit 8 without a GPU),
# NCCL_NVLS_ENABLE=0 unless set, mpirun's root flag ($root), the virtual nodes the emulated impls
# take ($nodes: 2 where there are 2 GPUs or more), from_caller, and run / expect, which append a
# run's table to $out/tables.txt and its JSON to $out/NAME.json and set fail=1 on a wrong exit,
# and all_wrong, which sets it unless a negative control counted every row it should.
caller=$PWD
# from_caller PATH: PATH as the caller meant it, from the folder the script was started in.
from_caller() { case $1 in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$caller/$1" ;; esac; }
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
bin=target/release
[ -n "${GINBENCH_BIN:-}" ] && bin=$(from_caller "$GINBENCH_BIN")
n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${n:-0}" -lt 1 ]; then echo "$(basename "$0"): no GPU found" >&2; exit 8; fi
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
root=(); [ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
nodes=1; [ "$n" -ge 2 ] && nodes=2
fail=0

# expect CODE NAME CMD...: run CMD with -J $out/NAME.json; fail unless it exits CODE.
expect() {
  local want=$1 name=$2; shift 2
  echo "## $name: $*" >> "$out/tables.txt"
  "$@" -J "$out/$name.json" >> "$out/tables.txt"
  local rc=$?
  echo "$name: exit $rc"
  [ $rc = "$want" ] || { fail=1; echo "$name: expected exit $want" >&2; }
}
run() { expect 0 "$@"; }

# all_wrong NAME SELECT [ENOUGH]: fail unless every checked row of NAME.json that SELECT (a Python
# expression on the row `r`) picks counted wrong values (ENOUGH, default r["wrong"] > 0), and one
# row at least is picked: a negative control's exit 7 alone is one wrong row anywhere. Needs
# python3.
all_wrong() {
  local name=$1
  command -v python3 > /dev/null || { echo "$name: rows not inspected: no python3" >&2; fail=1; return; }
  python3 - "$out/$name.json" "$2" "${3:-r['wrong'] > 0}" << 'PY' || fail=1
import json, sys
path, select, enough = sys.argv[1:]
rows = [r for r in json.load(open(path))["rows"] if r.get("wrong") is not None and eval(select, {}, {"r": r})]
short = [f'{r["impl"]} {r.get("phase") or r.get("placement")} {r["size_bytes"]} B: {r["wrong"]}' for r in rows
         if not eval(enough, {}, {"r": r})]
print(f'{path.rsplit("/", 1)[-1]} ({select}): {len(rows) - len(short)} of {len(rows)} rows counted wrong ({enough})')
if short or not rows:
    print("  short: " + (", ".join(short) or "no row picked"), file=sys.stderr)
    sys.exit(1)
PY
}
