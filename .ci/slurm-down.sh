#!/usr/bin/env bash
# Stop what .ci/slurm-up.sh STATE_DIR started (every slurmd, slurmctld, munged), each by the PID in its pid file,
# and remove the /etc/slurm/slurm.conf it wrote.
#   .ci/slurm-down.sh [STATE_DIR]   (default /tmp/pixelpipe-slurm)
set -uo pipefail
STATE=$(realpath -m "${1:-/tmp/pixelpipe-slurm}")
stop() {  # stop PIDFILE: TERM, wait up to 10 s, then KILL
  local pid
  [ -s "$1" ] || return 0
  pid=$(cat "$1")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  fi
  rm -f "$1"
}
for pidfile in "$STATE"/slurmd*.pid; do  # one per node entry (slurmd-NODE.pid)
  stop "$pidfile"
done
stop "$STATE/slurmctld.pid"
stop "$STATE/munge/munged.pid"
ETC_CONF=/etc/slurm/slurm.conf
if [ -e "$ETC_CONF" ] && head -1 "$ETC_CONF" | grep -q "^# One-node cluster written by pixelpipe"; then
  rm -f "$ETC_CONF"
fi
