#!/usr/bin/env bash
# The main job on a Slurm cluster, end to end, as a cluster user drives it (README,
# docs/slurm.md, docs/regressions.md), on a private cluster started here
# (ci/slurm-local.sh) with a fresh history. Two phases (PHASES, default "plant load"):
#
# plant (in WORK):
#   1. the first BEFORE nights: verify, judge nothing yet and say why, exit 0;
#   2. a baseline recorded with `apptune baseline record` (the command the first night
#      advised): BASELINE=history records it from those nights (`--from-history BEFORE`),
#      BASELINE=sessions runs SESSIONS back-to-back sessions;
#   3. UNCHANGED nights on identical builds: each must exit 0 with no REGRESSION;
#   4. a regression planted (the gnu `tuned` ladder to -O1, and Open MPI forced to TCP in the
#      partition's environment) before the last night: it must exit 1, name the regression
#      and what changed since the baseline (the environment variable, the flags).
#
# load (in WORK/load: a tree and a history of its own; LOAD_APPS, gnu tuned only), on a
# partition with a shared node's limit (run_quality.max_outside_cpu: 0.98, docs/slurm.md):
#   1. BUSY nights with HOGS CPU-bound processes beside the runs (clean under that limit);
#   2. the baseline from them (`--from-history BUSY`): refused, naming the figures too noisy
#      to judge by, when some are; then recorded with --accept-noisy;
#   3. QUIET nights without the hogs, the gnu `tuned` ladder at -O1 from the first of them:
#      check-regressions must name the node's state as a cause, and blame the flag change
#      nowhere the node's state does not explain the change as well;
#   4. a night with BLIS's libblas.so.3 behind OpenBLAS's soname (libopenblas.so.0) by
#      LD_LIBRARY_PATH in the partition's environment: each HPCC record must name the
#      library loaded by its path and hash; then a night with LD_LIBRARY_PATH at
#      OpenBLAS's own directory: named as changing no library.
#
#   benchmarks/nightly_slurm.sh [WORK_DIR]     # default /tmp/apptune-nightly-slurm
#
# Settings (environment): APPS (default "netpipe mpi-micro"), MODE (ci: the ci inputs, or
# nightly), BEFORE (nights before the baseline, default 5), BASELINE (history or sessions,
# default history), SESSIONS (baseline sessions, default 3), UNCHANGED (nights after it,
# default 5), REPEATS (per night, default 3), PARTITION (default localslurm:exclusive, one
# job per node); the load phase's LOAD_APPS (default "hpcc netpipe"; HPCC is the one that
# loads a BLAS), BUSY (default 4), QUIET (default 3), HOGS (default 3).
# Works on copies of the tree (the planted changes never touch the repository), each
# copy's apptune first on PYTHONPATH. Prints one line per night and the checks; exit 1
# when a check fails. Not a test: its duration and results go into docs/measurements.md
# with the date, the machine and this command.
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
phases=${PHASES:-plant load}
load_apps=${LOAD_APPS:-hpcc netpipe}
busy=${BUSY:-4}
quiet=${QUIET:-3}
hogs=${HOGS:-3}
apptune="$repo/.venv/bin/apptune"
python="$repo/.venv/bin/python"
pythonpath=${PYTHONPATH:-}

rm -rf "$work"
mkdir -p "$work"
use_tree() {  # use_tree DIR: a copy of the repository's tree in DIR/tree; history, runs in DIR
  mkdir -p "$1/tree"
  (cd "$repo" && git ls-files -z | xargs -0 tar -cf - | tar -xf - -C "$1/tree")
  tree="$1/tree"
  export APPTUNE_ROOT="$tree" APPTUNE_HISTORY="$1/history" APPTUNE_RUNS="$1/runs" APPTUNE="$apptune"
  export PYTHONPATH="$tree${pythonpath:+:$pythonpath}"
}
# one node: the private cluster's nodes share this host's CPUs, so two jobs on two "nodes"
# at once disturb each other (and their runs are then not judged)
bash "$repo/ci/slurm-local.sh" start "$work/slurm" 1 > "$work/slurm-start.log" 2>&1 || {
  cat "$work/slurm-start.log"; exit 1; }
hog_pids=()
hog() {  # hog N: N CPU-bound processes beside the runs
  for _ in $(seq "$1"); do bash -c 'while :; do :; done' & hog_pids+=($!); done
}
unhog() {
  if [ ${#hog_pids[@]} -gt 0 ]; then kill "${hog_pids[@]}" 2>/dev/null; wait "${hog_pids[@]}" 2>/dev/null; fi
  hog_pids=()
}
trap 'unhog; bash "$repo/ci/slurm-local.sh" stop "$work/slurm" > /dev/null 2>&1' EXIT
export SLURM_CONF="$work/slurm/slurm.conf"

summary="$work/summary.txt"
{ git -C "$repo" log --oneline -1; "$python" -m apptune.machine | grep '"id"'
  echo "phases: $phases"; } > "$summary"
failed=0
check() {  # check WHAT CONDITION...
  local what=$1; shift
  if "$@"; then echo "ok: $what" >> "$summary"; else echo "FAILED: $what" >> "$summary"; failed=1; fi
}

night() {  # night N [SELECT]: one ci/nightly.sh in $where; sets rc, log and run_dir
  local s; s=$(date +%s)
  log="$where/night-$1.log"
  APPTUNE_NIGHTLY_MODE=$mode APPTUNE_NIGHTLY_REPEATS=$repeats APPTUNE_QUIET_WAIT=60 \
    APPTUNE_NIGHTLY_SELECT="${2:-$select}" APPTUNE_NIGHTLY_ARGS="--system $partition" \
    bash "$tree/ci/nightly.sh" > "$log" 2>&1
  rc=$?
  run_dir=$(sed -n 's/^nightly: run \(.*\): tests exit.*/\1/p' "$log" | tail -1)
  echo "night $1: exit $rc, $(grep -c 'REGRESSION' "$log") line(s) with REGRESSION," \
    "$(grep -c 'IMPROVEMENT' "$log") with IMPROVEMENT, $(( $(date +%s) - s )) s" >> "$summary"
}

selection() {  # selection APP...: apptune run's selection (select), baseline record's (checks)
  select="" checks=""
  for a in "$@"; do select="$select --app $a"; checks="$checks -c reframe-checks/$a"; done
  select="$select --env gnu"
}

record_baseline() {  # record_baseline LOG OPTION...: sets brc
  local to=$1
  shift
  # shellcheck disable=SC2086  # a list of options
  (cd "$tree" && "$apptune" baseline record $checks --mode "$mode" "$@" --yes \
     -- --system "$partition" -p '^gnu$') >> "$to" 2>&1
  brc=$?
}

slower_ladder() {  # the gnu `tuned` ladder at -O1 in the copy
  sed -i 's/tuned: {cflags: \[-O3, -march=native, -funroll-loops\], fflags: \[-O3, -march=native, -funroll-loops\],/tuned: {cflags: [-O1], fflags: [-O1],/' "$tree/site-config/flag-ladders.yaml"
}

cluster_edit() {  # cluster_edit PYTHON: edit the copy's cluster file, its data as `c`
  "$python" -c "import sys, yaml
p = sys.argv[1]
c = yaml.safe_load(open(p))
$1
open(p, 'w').write(yaml.safe_dump(c, sort_keys=False))" "$tree/site-config/clusters/localslurm.yaml"
}

phase_plant() {
  local s how advice last
  where="$work"
  use_tree "$work"
  # shellcheck disable=SC2086  # a list of names
  selection $apps
  echo "plant: apps $apps; mode $mode; $repeats repeats a night; partition $partition;" \
    "$before night(s), baseline from $baseline, $unchanged unchanged night(s)" >> "$summary"
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
  record_baseline "$work/baseline.log" "${how[@]}"
  echo "baseline record ${how[*]}: exit $brc, $(( $(date +%s) - s )) s" >> "$summary"
  check "baseline recorded" [ "$brc" = 0 ]
  # 3. unchanged nights
  for i in $(seq $(( before + 1 )) $(( before + unchanged ))); do
    night "$i"
    check "unchanged night $i raises no REGRESSION" test "$(grep -c REGRESSION "$log")" = 0
    check "unchanged night $i exits 0" [ "$rc" = 0 ]
  done
  # 4. the planted regression: a flag ladder and a run-time environment
  slower_ladder
  cluster_edit "for p in c['partitions'].values(): p['env_vars']['OMPI_MCA_btl'] = 'tcp,self'"
  last=$(( before + unchanged + 1 ))
  night "$last"
  check "the planted regression exits 1" [ "$rc" = 1 ]
  check "the planted regression is named" grep -q "REGRESSION" "$log"
  check "what changed is named" grep -qE "REGRESSION.*changed: .*(OMPI_MCA_btl|-O1)" "$log"
}

phase_load() {
  local s st pname=${partition#*:} blis openblas hpcc="--app hpcc --env gnu --variant tuned"
  where="$work/load"
  use_tree "$where"
  # shellcheck disable=SC2086  # a list of names
  selection $load_apps
  select="$select --variant tuned"
  echo "load: apps $load_apps (gnu tuned); mode $mode; $repeats repeats a night; partition" \
    "$partition with max_outside_cpu 0.98; $busy busy night(s) beside $hogs hog(s)," \
    "$quiet quiet night(s), then 2 library nights (HPCC)" >> "$summary"
  # a shared node's limit, as docs/slurm.md gives it: runs beside other work are clean
  cluster_edit "c['partitions']['$pname']['run_quality'] = {'max_outside_cpu': 0.98, 'max_steal': 0.5}"
  # 1. busy nights
  hog "$hogs"
  for i in $(seq "$busy"); do
    night "$i"
    check "busy night $i exits 0" [ "$rc" = 0 ]
  done
  unhog
  # 2. the baseline from them: refused when too noisy, then recorded as the user would
  s=$(date +%s)
  record_baseline "$where/baseline.log" --from-history "$busy"
  echo "baseline record --from-history $busy: exit $brc;" \
    "$(grep -c 'too noisy to judge by: ' "$where/baseline.log") entr(ies) too noisy to judge by," \
    "$(( $(date +%s) - s )) s" >> "$summary"
  if [ "$brc" != 0 ]; then
    check "the refused baseline names its figures too noisy to judge by" \
      grep -q "too noisy to judge by: " "$where/baseline.log"
    record_baseline "$where/baseline.log" --from-history "$busy" --accept-noisy
  fi
  check "baseline recorded" [ "$brc" = 0 ]
  # 3. quiet nights, the ladder at -O1 from the first of them
  slower_ladder
  for i in $(seq $(( busy + 1 )) $(( busy + quiet ))); do
    night "$i"
    check "quiet night $i raises no REGRESSION" test "$(grep -c REGRESSION "$log")" = 0
  done
  "$python" "$repo/benchmarks/nightly_checks.py" cause "$run_dir" > "$where/cause.log" 2>&1
  st=$?
  check "the node's state is named, the flags are not blamed ($(tail -1 "$where/cause.log"))" [ "$st" = 0 ]
  # 4. BLIS behind OpenBLAS's soname; then LD_LIBRARY_PATH at OpenBLAS's own directory
  blis=$(find /usr/lib/*/blis-* -name libblas.so.3 | head -1)
  openblas=$(dirname "$(readlink -f "$(find /usr/lib/*/ -maxdepth 1 -name libopenblas.so.0 | head -1)")")
  mkdir -p "$where/blis"
  ln -sf "$blis" "$where/blis/libopenblas.so.0"
  cluster_edit "c['environments']['gnu']['env_vars']['LD_LIBRARY_PATH'] = '$where/blis'"
  night $(( busy + quiet + 1 )) "$hpcc"
  "$python" "$repo/benchmarks/nightly_checks.py" loaded "$run_dir" "$blis (sha256 " > "$where/swap.log" 2>&1
  st=$?
  check "BLIS put in by LD_LIBRARY_PATH is named by path and hash ($(grep -m1 -o "loaded [^']*" "$where/swap.log"))" [ "$st" = 0 ]
  cluster_edit "c['environments']['gnu']['env_vars']['LD_LIBRARY_PATH'] = '$openblas'"
  night $(( busy + quiet + 2 )) "$hpcc"
  "$python" "$repo/benchmarks/nightly_checks.py" loaded "$run_dir" "the libraries the ranks loaded are the same" > "$where/same.log" 2>&1
  st=$?
  check "a library path that changes no library is said to change none" [ "$st" = 0 ]
}

for p in $phases; do "phase_$p"; done

cat "$summary"
exit "$failed"
