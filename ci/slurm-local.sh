#!/usr/bin/env bash
# A private Slurm cluster on this machine, for the real-Slurm integration test and
# for trying the suite against Slurm by hand. Everything lives under one directory
# (config, munge key and socket, state, spool, logs, pid files): /etc/slurm and
# /etc/munge are not touched, and clients find this cluster through SLURM_CONF.
#
#   ci/slurm-local.sh start DIR [NODES]   munged, slurmctld and NODES slurmd (default 1),
#                                         each node with this host's CPUs; returns when
#                                         every node is idle, or fails (and tears down)
#   ci/slurm-local.sh stop DIR            cancel jobs, stop every daemon started under DIR
#   ci/slurm-local.sh ctld-stop DIR       stop slurmctld only (failure tests)
#   ci/slurm-local.sh ctld-start DIR      start it again and wait until every node has
#                                         registered (busy or DOWN nodes stay as they are)
#   ci/slurm-local.sh run DIR [NODES] -- CMD...   start, run CMD with SLURM_CONF set, stop
#                                         (always: also when CMD fails or is interrupted)
#
# Needs root (slurmd runs jobs as their user) and Debian's slurmctld, slurmd,
# slurm-client and munge (ci/apt-packages.txt). No slurmdbd: there is no sacct;
# apptune polls with squeue and reads final job states from slurmctld (docs/slurm.md).
set -euo pipefail

die() { echo "slurm-local: $*" >&2; exit 1; }
[ $# -ge 2 ] || die "usage: $0 start|stop|ctld-stop|ctld-start|run DIR [NODES] [-- CMD...]"
cmd=$1
mkdir -p "$2"
dir=$(cd "$2" && pwd)
conf="$dir/slurm.conf"
export SLURM_CONF="$conf"

pid_alive() { [ -f "$1" ] && alive "$(cat "$1")"; }

# Wait (at most $2 s) until every node is idle.
wait_idle() {
  local deadline=$(( $(date +%s) + $1 )) states
  while :; do
    states=$(timeout 5 sinfo -h -N -o '%T' 2>/dev/null | sort -u | tr '\n' ' ') || true
    [ "$states" = "idle " ] && return 0
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "slurm-local: nodes not idle after $1 s (states: ${states:-no answer from slurmctld})" >&2
      tail -n 20 "$dir"/log/slurmctld.log "$dir"/log/slurmd-*.log >&2 2>/dev/null || true
      return 1
    fi
    sleep 0.3
  done
}

# Wait (at most $1 s) until slurmctld answers and every node has registered: no state
# marked '*' (not responding) or still unknown. Jobs and DOWN nodes survive a restart.
wait_registered() {
  local deadline=$(( $(date +%s) + $1 )) states
  while :; do
    states=$(timeout 5 sinfo -h -N -o '%T' 2>/dev/null | sort -u | tr '\n' ' ') || true
    if [ -n "$states" ] && ! grep -qE '\*|unknown' <<<"$states"; then return 0; fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "slurm-local: nodes not registered after $1 s (states: ${states:-no answer from slurmctld})" >&2
      tail -n 20 "$dir"/log/slurmctld.log >&2 2>/dev/null || true
      return 1
    fi
    sleep 0.3
  done
}

start_ctld() {
  slurmctld -f "$conf"
  # slurmctld re-reads its saved state; nodes come back when their slurmd re-registers
  for p in "$dir"/run/slurmd-*.pid; do pid_alive "$p" && kill -HUP "$(cat "$p")"; done
  wait_registered 30
}

# A pid counts as gone once it exited (a zombie that nobody reaps counts as gone too).
alive() { [ -e "/proc/$1" ] && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null; }

stop_pidfiles() {  # TERM all, wait up to 10 s, then KILL: only the pids in the files, which we started
  local f pids=()
  for f in "$@"; do
    [ -f "$f" ] || continue
    pids+=("$(cat "$f")")
    rm -f "$f"
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 100); do
    local left=()
    for p in "${pids[@]}"; do alive "$p" && left+=("$p"); done
    [ ${#left[@]} -eq 0 ] && return 0
    sleep 0.1
  done
  kill -KILL "${left[@]}" 2>/dev/null || true
}

stop_all() {
  if pid_alive "$dir/run/slurmctld.pid"; then
    timeout 10 scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
    for _ in $(seq 50); do
      [ -z "$(timeout 5 squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.2
    done
  fi
  stop_pidfiles "$dir"/run/slurmd-*.pid "$dir/run/slurmctld.pid"
  stop_pidfiles "$dir/run/munged.pid"
  if [ -f "$dir/run/munge-sockdir" ]; then
    rm -rf "$(cat "$dir/run/munge-sockdir")"
    rm -f "$dir/run/munge-sockdir"
  fi
  # Job steps (slurmstepd) and job processes outlive a killed slurmd; they carry this
  # cluster's SLURM_CONF in their environment, which names exactly what we started.
  local p
  for p in /proc/[0-9]*; do
    [ "${p#/proc/}" = "$$" ] && continue
    if { tr '\0' '\n' < "$p/environ"; } 2>/dev/null | grep -qxF "SLURM_CONF=$conf"; then
      kill -KILL "${p#/proc/}" 2>/dev/null || true
    fi
  done
}

write_conf() {
  local nodes=$1 host cpus ports i task_plugin
  host=$(hostname -s)
  cpus=$(nproc)
  task_plugin=task/none
  [ "$nodes" -eq 1 ] && task_plugin=task/affinity
  # free TCP ports for slurmctld and each slurmd (several slurmd share this host)
  mapfile -t ports < <(python3 - "$((nodes + 1))" <<'EOF'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print("\n".join(str(s.getsockname()[1]) for s in socks))
EOF
)
  cat > "$conf" <<EOF
# Written by ci/slurm-local.sh: a private cluster on $host ($nodes node(s) x $cpus CPUs).
ClusterName=apptune
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=${ports[0]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
# PMIx puts per-step directories under TmpFS: one per node, since the nodes share a host
TmpFS=$dir/tmp/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
# No cgroups needed (containers, CI runners): Linux process tracking. On one node,
# task/affinity binds the tasks of a step that asks for it (srun --cpu-bind=cores,
# --distribution=block:cyclic: a recipe's placements); TaskPluginParam=None leaves every
# other step unbound. With several nodes there is no task plugin: the nodes share this
# host's CPUs, and task/affinity confines each node's tasks to the CPUs Slurm gave that
# node (even with --cpu-bind=none), so one rank on each of two nodes would both run on CPU 0.
ProctrackType=proctrack/linuxproc
TaskPlugin=$task_plugin
TaskPluginParam=None
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
# No slurmdbd: no sacct. Finished jobs stay in slurmctld for MinJobAge seconds, where
# apptune reads their final state (TIMEOUT, NODE_FAIL, ...) with squeue.
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MinJobAge=600
# Only nodes that stopped answering return by themselves; a node set DOWN stays DOWN
ReturnToService=1
KillWait=2
MessageTimeout=5
InactiveLimit=0
MailProg=/bin/true
EOF
  for i in $(seq 1 "$nodes"); do
    echo "NodeName=n$i NodeHostname=$host NodeAddr=127.0.0.1 Port=${ports[$i]} CPUs=$cpus State=UNKNOWN" >> "$conf"
    mkdir -p "$dir/tmp/n$i" "$dir/spool/n$i"
  done
  echo "PartitionName=batch Nodes=ALL Default=YES MaxTime=60 State=UP" >> "$conf"
}

start_all() {
  local nodes=${1:-1} i
  [ "$(id -u)" = 0 ] || die "needs root (slurmd runs jobs as their user)"
  for t in munged mungekey slurmctld slurmd sbatch squeue; do
    command -v "$t" >/dev/null || die "$t not found (bash ci/bootstrap.sh installs slurmctld, slurmd, slurm-client, munge)"
  done
  if pid_alive "$dir/run/slurmctld.pid"; then die "a cluster is already running under $dir"; fi
  mkdir -p "$dir/munge" "$dir/run" "$dir/state" "$dir/log"
  chmod 700 "$dir/munge"; chmod 755 "$dir/run"
  trap 'echo "slurm-local: start failed; tearing down" >&2; stop_all' ERR
  # munged wants every directory above its socket searchable by all, which DIR may not be
  # (pytest's temporary directories are 0700): the socket gets a short directory of its own
  sockdir=$(mktemp -d /tmp/apptune-munge.XXXXXX)
  chmod 755 "$sockdir"
  echo "$sockdir" > "$dir/run/munge-sockdir"
  sock="$sockdir/munge.sock"
  write_conf "$nodes"
  [ -f "$dir/munge/munge.key" ] || mungekey -c -b 1024 -k "$dir/munge/munge.key"
  munged --key-file="$dir/munge/munge.key" --socket="$sock" \
         --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" \
         --seed-file="$dir/munge/munged.seed"
  slurmctld -f "$conf"
  for i in $(seq 1 "$nodes"); do slurmd -f "$conf" -N "n$i"; done
  wait_idle 30
  trap - ERR
  echo "export SLURM_CONF=$conf"
}

case $cmd in
  start) start_all "${3:-1}" ;;
  stop) stop_all ;;
  ctld-stop) stop_pidfiles "$dir/run/slurmctld.pid" ;;
  ctld-start) start_ctld ;;
  run)
    shift 2
    nodes=1
    if [ $# -gt 0 ] && [ "$1" != "--" ]; then nodes=$1; shift; fi
    [ "${1:-}" = "--" ] && shift
    [ $# -gt 0 ] || die "run: no command after --"
    trap stop_all EXIT INT TERM
    start_all "$nodes" >/dev/null
    "$@"
    ;;
  *) die "unknown command $cmd" ;;
esac
