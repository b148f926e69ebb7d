# shellcheck shell=bash
# The steps of ci/slurm/efa.sbatch and ib.sbatch, sourced by them with FABRIC (efa or ib) and
# TC_RUN (1: also a run with the DP communicator on its own traffic class; empty: none) set.
# Every step runs even when an earlier one failed (a cluster hour is dear); the job then exits 1
# and names them. A failed MPI check stops the job at once: nothing after it could run.
#
# Settings (environment, all optional): GINBENCH_BIN (binaries, default target/release of the
# submit folder), GB_OUT (results folder, default results/<fabric>-<job id>), GB_ARGS, GB_EP_ARGS,
# GB_INTERFERENCE_ARGS (extra flags of alltoall_perf, ep_perf, interference_perf; split on
# blanks), GB_DP_TC (the DP communicator's traffic class), GB_PROFILE_SIZE (e.g. 64M: an Nsight
# Systems capture of interference_perf at that background size), NSYS (the nsys to use).
root=${SLURM_SUBMIT_DIR:-$PWD}
BIN=${GINBENCH_BIN:-$root/target/release}
OUT=${GB_OUT:-$root/results/$FABRIC-${SLURM_JOB_ID:-local}}
read -ra ARGS <<< "${GB_ARGS:-}"
read -ra EP_ARGS <<< "${GB_EP_ARGS:-}"
read -ra INTERFERENCE_ARGS <<< "${GB_INTERFERENCE_ARGS:-}"
NSYS=${NSYS:-nsys}
if [ -n "${GB_PROFILE_SIZE:-}" ] && ! command -v "$NSYS" > /dev/null; then
  echo "ci/slurm: GB_PROFILE_SIZE is set but there is no $NSYS on PATH (set NSYS, or unset GB_PROFILE_SIZE)" >&2
  exit 8
fi
mkdir -p "$OUT"

# Each rank's own thread, NCCL's proxy thread and (proxy GIN) the GIN progress thread need a core
# each, or their waits of microseconds become milliseconds: the job asks for --cpus-per-task, and
# newer srun versions no longer pass it on to the steps by themselves.
export SRUN_CPUS_PER_TASK=${SLURM_CPUS_PER_TASK:-8}
run=(srun --mpi=pmix)
per_node=${SLURM_NTASKS_PER_NODE:-8}
per_node=${per_node%%(*}  # "8(x2)" -> 8
ranks=${SLURM_NTASKS:-$((per_node * ${SLURM_JOB_NUM_NODES:-1}))}

failed=()
# step NAME CMD...: runs CMD, records NAME when it fails, goes on.
step() {
  local name=$1 rc=0
  shift
  echo "== $name: $*"
  "$@" || rc=$?
  if [ "$rc" != 0 ]; then
    echo "== $name: exit $rc"
    failed+=("$name")
  fi
}

"${run[@]}" "$BIN/ginbench" mpi-check || exit
if "${run[@]}" -N 1 -n 1 "$BIN/ginbench" env --json > "$OUT/env.json.tmp"; then
  mv "$OUT/env.json.tmp" "$OUT/env.json"
else
  rm -f "$OUT/env.json.tmp"
  failed+=(env)
fi

# Every alltoall impl; gin / hybrid must not be skipped on this cluster.
step alltoall "${run[@]}" "$BIN/alltoall_perf" -b 8 -e 1G -f 2 -R 2 -D all --require-gin -T 600 \
  -J "$OUT/alltoall.json" --csv "$OUT/alltoall.csv" "${ARGS[@]}"

# MoE dispatch / combine, LL and HT, over every rank (gin and hybrid must not be skipped; nvl
# needs every rank in one NVLink domain, so it runs in the next step, on one node, beside host).
step ep "${run[@]}" "$BIN/ep_perf" --mode ll,ht -D host,gin,hybrid --require-gin -T 600 \
  -J "$OUT/ep.json" --csv "$OUT/ep.csv" "${EP_ARGS[@]}"
step ep-node "${run[@]}" -N 1 -n "$per_node" "$BIN/ep_perf" --mode ll,ht -D host,nvl -T 600 \
  -J "$OUT/ep-node.json" --csv "$OUT/ep-node.csv" "${EP_ARGS[@]}"

# Interference: the EP foreground (hybrid: NVLink inside a node, GIN across) against the DP
# all-reduce. Layout "across": EP and DP both over every rank, so both cross the network; the
# runs differ in where DP's traffic goes (NCCL picks NICs per process, not per communicator):
#   shared   both on the cluster's network, NCCL's defaults
#   tc       DP with its own traffic class (where the network uses it: TC_RUN)
#   socket   DP over the hosts' TCP network (netName Socket), EP alone on the fast one
# Layout "node": EP inside each node (Megatron's EP <= 8) and DP across nodes.
across=(--fg ep -D hybrid --mode ll,ht --ep "$ranks" --dp "$ranks" --require-gin -b 1M -e 1G -f 4 -T 900)
across+=("${INTERFERENCE_ARGS[@]}")
step interference-shared "${run[@]}" "$BIN/interference_perf" "${across[@]}" \
  -J "$OUT/interference-shared.json" --csv "$OUT/interference-shared.csv"
if [ -n "$TC_RUN" ]; then
  step interference-tc "${run[@]}" "$BIN/interference_perf" "${across[@]}" --dp-traffic-class "${GB_DP_TC:-1}" \
    -J "$OUT/interference-tc.json" --csv "$OUT/interference-tc.csv"
fi
step interference-socket "${run[@]}" "$BIN/interference_perf" "${across[@]}" --dp-net-name Socket \
  -J "$OUT/interference-socket.json" --csv "$OUT/interference-socket.csv"
step interference-node "${run[@]}" "$BIN/interference_perf" --fg ep -D hybrid --mode ll,ht --ep "$per_node" \
  --require-gin -b 1M -e 1G -f 4 -T 900 "${INTERFERENCE_ARGS[@]}" \
  -J "$OUT/interference-node.json" --csv "$OUT/interference-node.csv"

# Opt-in Nsight Systems capture of one background size: its together windows (one per mode,
# and one more for each retried attempt: --capture-range-end=repeat keeps them all) with NVTX
# ranges of both sides, one report per rank and window. On EFA the NIC counters are sampled by
# the first rank of each node only (they are the node's).
if [ -n "${GB_PROFILE_SIZE:-}" ]; then
  # shellcheck disable=SC2016
  profile='nsys=$1 out=$2 fabric=$3; shift 3
    extra=(); if [ "$fabric" = efa ] && [ "${SLURM_LOCALID:-0}" = 0 ]; then extra=(--enable efa_metrics); fi
    exec "$nsys" profile --capture-range=cudaProfilerApi --capture-range-end=repeat -t cuda,nvtx --force-overwrite true \
      "${extra[@]}" -o "$out/nsys-interference-${SLURM_PROCID:-0}" "$@"'
  step profile "${run[@]}" bash -c "$profile" nsys-wrap "$NSYS" "$OUT" "$FABRIC" "$BIN/interference_perf" \
    "${across[@]}" -b "$GB_PROFILE_SIZE" -e "$GB_PROFILE_SIZE" --profile-size "$GB_PROFILE_SIZE" \
    -J "$OUT/interference-profiled.json" --csv "$OUT/interference-profiled.csv"
fi

if [ ${#failed[@]} -gt 0 ]; then
  echo "ci/slurm: failed steps: ${failed[*]} (results so far in $OUT)" >&2
  exit 1
fi
echo "ci/slurm: every step passed; results in $OUT"
