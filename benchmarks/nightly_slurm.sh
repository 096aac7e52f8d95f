#!/usr/bin/env bash
# The main job on a Slurm cluster, end to end, as a cluster user drives it (README,
# docs/slurm.md, docs/regressions.md), on a private cluster started here
# (ci/slurm-local.sh) with a fresh history:
#
#   1. the first BEFORE nights: verify, judge nothing yet and say why, exit 0;
#   2. a baseline recorded with `apptune baseline record` (the command the first night
#      advised): BASELINE=history records it from those nights (`--from-history BEFORE`),
#      BASELINE=sessions runs SESSIONS back-to-back sessions;
#   3. UNCHANGED nights on identical builds: each must exit 0 with no REGRESSION;
#   4. a regression planted (the gnu `tuned` ladder to -O1, and Open MPI forced to TCP in the
#      partition's environment) before the last night: it must exit 1, name the regression
#      and what changed since the baseline (the environment variable, the flags).
#
#   benchmarks/nightly_slurm.sh [WORK_DIR]     # default /tmp/apptune-nightly-slurm
#
# Settings (environment): APPS (default "netpipe mpi-micro"), MODE (ci: the ci inputs, or
# nightly), BEFORE (nights before the baseline, default 5), BASELINE (history or sessions,
# default history), SESSIONS (baseline sessions, default 3), UNCHANGED (nights after it,
# default 5), REPEATS (per night, default 3), PARTITION (default localslurm:exclusive, one
# job per node).
# Works on a copy of the tree (the planted changes never touch the repository). Prints one
# line per night and the checks; exit 1 when a check fails. Not a test: its duration and
# results go into docs/measurements.md with the date, the machine and this command.
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/tmp/apptune-nightly-slurm}
apps=${APPS:-netpipe mpi-micro}
mode=${MODE:-ci}
unchanged=${UNCHANGED:-5}
before=${BEFORE:-5}
baseline=${BASELINE:-history}
sessions=${SESSIONS:-3}
repeats=${REPEATS:-3}
partition=${PARTITION:-localslurm:exclusive}
apptune="$repo/.venv/bin/apptune"

rm -rf "$work"
mkdir -p "$work/tree"
(cd "$repo" && git ls-files -z | xargs -0 tar -cf - | tar -xf - -C "$work/tree")
tree="$work/tree"
export APPTUNE_ROOT="$tree" APPTUNE_HISTORY="$work/history" APPTUNE_RUNS="$work/runs" APPTUNE="$apptune"
# one node: the private cluster's nodes share this host's CPUs, so two jobs on two "nodes"
# at once disturb each other (and their runs are then not judged)
bash "$repo/ci/slurm-local.sh" start "$work/slurm" 1 > "$work/slurm-start.log" 2>&1 || {
  cat "$work/slurm-start.log"; exit 1; }
trap 'bash "$repo/ci/slurm-local.sh" stop "$work/slurm" > /dev/null 2>&1' EXIT
export SLURM_CONF="$work/slurm/slurm.conf"

select=""
for a in $apps; do select="$select --app $a"; done
select="$select --env gnu"
checks=""
for a in $apps; do checks="$checks -c reframe-checks/$a"; done
summary="$work/summary.txt"
{ git -C "$repo" log --oneline -1; "$repo/.venv/bin/python" -m apptune.machine | grep '"id"'
  echo "apps: $apps; mode $mode; $repeats repeats a night; partition $partition;" \
    "$before night(s), baseline from $baseline, $unchanged unchanged night(s)"; } > "$summary"
failed=0
check() {  # check WHAT CONDITION...
  local what=$1; shift
  if "$@"; then echo "ok: $what" >> "$summary"; else echo "FAILED: $what" >> "$summary"; failed=1; fi
}

night() {  # night N: one ci/nightly.sh; sets rc and log
  local s; s=$(date +%s)
  log="$work/night-$1.log"
  APPTUNE_NIGHTLY_MODE=$mode APPTUNE_NIGHTLY_REPEATS=$repeats APPTUNE_QUIET_WAIT=60 \
    APPTUNE_NIGHTLY_SELECT="$select" APPTUNE_NIGHTLY_ARGS="--system $partition" \
    bash "$tree/ci/nightly.sh" > "$log" 2>&1
  rc=$?
  echo "night $1: exit $rc, $(grep -c 'REGRESSION' "$log") line(s) with REGRESSION, $(( $(date +%s) - s )) s" >> "$summary"
}

# 1. the first nights of a new cluster
night 1
check "first night exits 0" [ "$rc" = 0 ]
check "first night says why nothing is judged" grep -qE "nothing to judge yet|insufficient data" "$log"
advice=$(grep -o 'apptune baseline record [^`]*' "$log" | head -1)
check "the advice names the tier and partition ($advice)" grep -q -- "--mode $mode -- --system $partition" <<< "$advice"
for i in $(seq 2 "$before"); do
  night "$i"
  check "night $i without a baseline exits 0" [ "$rc" = 0 ]
done

# 2. the baseline the advice names, for these applications
s=$(date +%s)
if [ "$baseline" = history ]; then
  how=(--from-history "$before")
else
  how=(--sessions "$sessions" --wait-for-quiet 60)
fi
# shellcheck disable=SC2086  # lists of options
(cd "$tree" && "$apptune" baseline record $checks --mode "$mode" "${how[@]}" --yes \
   -- --system "$partition" -p '^gnu$') > "$work/baseline.log" 2>&1
brc=$?
echo "baseline record ${how[*]}: exit $brc, $(( $(date +%s) - s )) s" >> "$summary"
check "baseline recorded" [ "$brc" = 0 ]

# 3. unchanged nights
for i in $(seq $(( before + 1 )) $(( before + unchanged ))); do
  night "$i"
  check "unchanged night $i raises no REGRESSION" test "$(grep -c REGRESSION "$log")" = 0
  check "unchanged night $i exits 0" [ "$rc" = 0 ]
done

# 4. the planted regression: a flag ladder and a run-time environment
sed -i 's/tuned: {cflags: \[-O3, -march=native, -funroll-loops\], fflags: \[-O3, -march=native, -funroll-loops\],/tuned: {cflags: [-O1], fflags: [-O1],/' "$tree/site-config/flag-ladders.yaml"
python3 - "$tree/site-config/clusters/localslurm.yaml" <<'EOF'
import re, sys
p = sys.argv[1]
s = open(p).read()
s = s.replace('OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: "1"}', 'OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: "1", OMPI_MCA_btl: "tcp,self"}')
open(p, "w").write(s)
EOF
last=$(( before + unchanged + 1 ))
night "$last"
check "the planted regression exits 1" [ "$rc" = 1 ]
check "the planted regression is named" grep -q "REGRESSION" "$log"
check "what changed is named" grep -qE "REGRESSION.*changed: .*(OMPI_MCA_btl|-O1)" "$log"

cat "$summary"
exit "$failed"
