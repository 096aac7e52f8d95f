#!/usr/bin/env bash
# Nightly regression run: the nightly tier with repeats, stored in the history,
# the report (with trends), then the regression verdict over the history, and the
# history site when APPTUNE_NIGHTLY_SITE asks for it.
#
#   ci/nightly.sh                     # from cron, scrontab or by hand; reads no stdin
#
# Exit status: 1 when check-regressions confirmed a regression (it printed the
# figure, the first bad run and what changed in provenance); otherwise the
# status of the run itself (non-zero when a test failed); then the status of
# writing the site; 0 only when every test passed, no regression was confirmed
# and the site, if asked for, was written.
#
# Settings (environment):
#   APPTUNE_NIGHTLY_REPEATS  runs of each test (default 3); verdicts use their median
#   APPTUNE_QUIET_WAIT       seconds each timed run may wait for a quiet node; unset: the
#                            partition's own quiet_wait_s, else APPTUNE_QUIET_WAIT_DEFAULT
#                            (default 120); a run that still is not clean is graded disturbed
#                            and not judged
#   APPTUNE_NIGHTLY_SELECT   apptune run's selection, word-split (e.g. "--app netpipe --env gnu";
#                            docs/regressions.md): a name that does not exist is refused
#   APPTUNE_NIGHTLY_ARGS     extra ReFrame options, word-split (e.g. "--system mycluster:compute")
#   APPTUNE_NIGHTLY_MODE     the ReFrame mode (default nightly; ci for a short night)
#   APPTUNE_NIGHTLY_SITE     a directory: also write the history site there (apptune history site:
#                            trends, change points and causes, since the last nightly, machines
#                            compared); unset: no site
#   APPTUNE_HISTORY          history directory (default ~/.local/share/apptune/history)
#   APPTUNE_RUNS             where run directories go (default runs/)
#   APPTUNE                  the apptune command (default .venv/bin/apptune)
# Examples for cron and Slurm's scrontab: docs/regressions.md.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
exec </dev/null

apptune=${APPTUNE:-$here/.venv/bin/apptune}
repeats=${APPTUNE_NIGHTLY_REPEATS:-3}
mode=${APPTUNE_NIGHTLY_MODE:-nightly}
run_dir=${APPTUNE_RUNS:-$here/runs}/$(date +%Y%m%dT%H%M%S)-$mode

# 1. the nightly tier, N repeats; `apptune run` stores the run in the history and writes
#    the report with its trend plots
run_rc=0
# shellcheck disable=SC2086  # APPTUNE_NIGHTLY_SELECT and _ARGS are lists of options
# the wait for a quiet node: APPTUNE_QUIET_WAIT for every partition, else each partition's
# own (a shared node's cluster file may set a longer one), else 120 s
wait=()
if [ -n "${APPTUNE_QUIET_WAIT:-}" ]; then wait=(--wait-for-quiet "$APPTUNE_QUIET_WAIT"); fi
export APPTUNE_QUIET_WAIT_DEFAULT=${APPTUNE_QUIET_WAIT_DEFAULT:-120}
"$apptune" run --mode "$mode" --repeats "$repeats" "${wait[@]}" \
  --run-dir "$run_dir" ${APPTUNE_NIGHTLY_SELECT:-} -- ${APPTUNE_NIGHTLY_ARGS:-} || run_rc=$?
if [ ! -f "$run_dir/report.json" ]; then
  echo "nightly: no run report in $run_dir (apptune run exit $run_rc)" >&2
  exit $(( run_rc ? run_rc : 2 ))
fi

# 2. the history has the run (idempotent: a stored run is left as it is)
"$apptune" history ingest "$run_dir"

# 3. the verdict over the history of nightly runs
check_rc=0
"$apptune" check-regressions --mode "$mode" --json "$run_dir/regressions.json" || check_rc=$?

# 4. the history as a static site, when asked for (a failure to write it fails the night)
site_rc=0
if [ -n "${APPTUNE_NIGHTLY_SITE:-}" ]; then
  "$apptune" history site "$APPTUNE_NIGHTLY_SITE" --mode "$mode" || site_rc=$?
fi

echo "nightly: run $run_dir: tests exit $run_rc, check-regressions exit $check_rc"
if [ "$site_rc" -ne 0 ]; then
  echo "nightly: the history site was not written to $APPTUNE_NIGHTLY_SITE (exit $site_rc)" >&2
fi
if [ "$check_rc" -ne 0 ]; then
  exit "$check_rc"
fi
if [ "$run_rc" -eq 0 ] && [ "$site_rc" -ne 0 ]; then
  exit "$site_rc"
fi
exit "$run_rc"
