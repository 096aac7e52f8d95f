#!/usr/bin/env bash
# The README's two commands on a fresh clone with empty caches, timed: `make run` (cold),
# `make run` again (the build cache warm), `make test`. apt packages are assumed installed
# (ci/bootstrap.sh installs what is missing; the clone gets its own virtualenv).
#
#   benchmarks/fresh_clone.sh [WORK_DIR]      # default /tmp/apptune-fresh; writes WORK_DIR/times.txt
#
# DURATIONS=N: `make test` also lists its N slowest tests (pytest --durations; same tests).
# STEPS="run test": the steps, in order (default "run run test"; the second `make run` shows
# the build cache at work).
#
# Not a test: the times go into docs/measurements.md (Build cache) with the date and the machine.
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/tmp/apptune-fresh}
rm -rf "$work"
mkdir -p "$work"
git clone -q "$repo" "$work/clone"
export APPTUNE_CACHE="$work/cache" APPTUNE_BUILD_CACHE="$work/builds" APPTUNE_HISTORY="$work/history" CI=true
cd "$work/clone"
{ git log --oneline -1; "$repo/.venv/bin/python" -m apptune.machine 2>/dev/null | grep '"id"'; } > "$work/times.txt"
for step in ${STEPS:-run run test}; do
  s=$(date +%s)
  extra=()
  [ "$step" = test ] && [ -n "${DURATIONS:-}" ] && extra=(PYTEST=".venv/bin/python -m pytest --durations=$DURATIONS")
  make "$step" "${extra[@]}" > "$work/make-$step-$s.log" 2>&1
  echo "make $step: exit $?, $(( $(date +%s) - s )) s" >> "$work/times.txt"
done
cat "$work/times.txt"
