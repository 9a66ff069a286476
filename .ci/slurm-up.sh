#!/usr/bin/env bash
# Bring up a one-node SLURM cluster on this host (munged, slurmctld, slurmd as plain daemons, no systemd,
# no cgroups), everything under one state directory; stop it with .ci/slurm-down.sh STATE_DIR.
#   .ci/slurm-up.sh [STATE_DIR]     (default /tmp/pixelpipe-slurm)
# Prints `export SLURM_CONF=...` (the same file is also installed as /etc/slurm/slurm.conf, see below).
# Needs root and Debian's slurm-wlm + munge (apt-get install slurm-wlm munge). Apart from
# /etc/slurm/slurm.conf nothing outside STATE_DIR is written: munge gets its own key and socket, slurm its
# own spool, logs and pid files.
set -euo pipefail
STATE=$(realpath -m "${1:-/tmp/pixelpipe-slurm}")
CTLD_PORT=${PIXELPIPE_SLURMCTLD_PORT:-6817}
SLURMD_PORT=${PIXELPIPE_SLURMD_PORT:-6818}
MIN_JOB_AGE=${PIXELPIPE_SLURM_MIN_JOB_AGE:-3600}  # finished jobs stay visible to squeue this long

die() { echo "slurm-up: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "needs root (slurmd runs jobs as their users)"
for b in munged munge slurmctld slurmd sbatch squeue sinfo scontrol; do
  command -v "$b" >/dev/null || die "'$b' not found: apt-get install slurm-wlm munge"
done
mkdir -p "$STATE"/{munge,ctld,spool,log}
chmod 700 "$STATE/munge"

# munge: a private key and socket, so a system munged (if any) is left alone.
if [ ! -s "$STATE/munge/munge.key" ]; then
  dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$STATE/munge/munge.key"
fi
SOCK="$STATE/munge/munge.socket"
munged --force --socket="$SOCK" --key-file="$STATE/munge/munge.key" --pid-file="$STATE/munge/munged.pid" \
  --log-file="$STATE/log/munged.log" --seed-file="$STATE/munge/munged.seed"
munge --socket="$SOCK" -n | unmunge --socket="$SOCK" >/dev/null || die "munge does not work: see $STATE/log/munged.log"

# slurm.conf: this host as the one node, its CPUs and a bit less memory than it has.
HOST=$(hostname -s)
read -r CPUS SOCKETS CORES THREADS MEM < <(slurmd -C | awk -F'[ =]' '/^NodeName/ {
  for (i = 1; i < NF; i++) v[$i] = $(i + 1); print v["CPUs"], v["SocketsPerBoard"], v["CoresPerSocket"], v["ThreadsPerCore"], v["RealMemory"] }')
MEM=$((MEM * 9 / 10))
cat > "$STATE/slurm.conf" <<CONF
# One-node cluster written by pixelpipe's .ci/slurm-up.sh
ClusterName=pixelpipe
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# A line per finished job (id, name, state, partition): the cluster's own record of what ran.
JobCompType=jobcomp/filetxt
JobCompLoc=$STATE/log/jobcomp.log
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
ReturnToService=2
MinJobAge=$MIN_JOB_AGE
SchedulerType=sched/backfill
MpiDefault=none
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS SocketsPerBoard=$SOCKETS CoresPerSocket=$CORES ThreadsPerCore=$THREADS RealMemory=$MEM State=UNKNOWN
# The partition names profiles/slurm uses; both on the one node.
PartitionName=cpu Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$HOST MaxTime=INFINITE State=UP
CONF
# The default path too: snakemake-executor-plugin-slurm-jobstep drops every SLURM_* variable (SLURM_CONF
# included) before its inner srun, so jobs only find a slurm.conf at the default path. An existing
# slurm.conf that this script did not write is never replaced.
ETC_CONF=/etc/slurm/slurm.conf
if [ -e "$ETC_CONF" ] && ! head -1 "$ETC_CONF" | grep -q "^# One-node cluster written by pixelpipe"; then
  die "$ETC_CONF exists and was not written by this script (a real SLURM setup?): not replacing it"
fi
mkdir -p /etc/slurm
cp "$STATE/slurm.conf" "$ETC_CONF"
export SLURM_CONF="$STATE/slurm.conf"

slurmctld -c -f "$SLURM_CONF"   # -c: start with no jobs from an earlier run
slurmd -f "$SLURM_CONF"
for _ in $(seq 60); do
  state=$(sinfo -h -n "$HOST" -o %T 2>/dev/null | head -1 || true)
  case "$state" in
    idle|mixed|allocated) echo "export SLURM_CONF=$SLURM_CONF"; exit 0 ;;
    down*|drain*) scontrol update nodename="$HOST" state=resume 2>/dev/null || true ;;
  esac
  sleep 0.5
done
die "node $HOST did not become idle (state '${state:-?}'): see $STATE/log/"
