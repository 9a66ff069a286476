#!/usr/bin/env bash
# Bring up a one-node SLURM cluster on this host (munged, slurmctld, slurmd as plain daemons, no systemd,
# no cgroups), everything under one state directory; stop it with .ci/slurm-down.sh STATE_DIR.
#   .ci/slurm-up.sh [STATE_DIR]     (default /tmp/pixelpipe-slurm)
#   PIXELPIPE_SLURM_NODES=2 .ci/slurm-up.sh [STATE_DIR]   two node entries on this host (pp-node1, pp-node2),
#     one slurmd each (`slurmd -N NAME`, its own port), sharing the host's CPUs and memory: multi-node jobs.
# Prints `export SLURM_CONF=...` (the same file is also installed as /etc/slurm/slurm.conf, see below).
# Needs root and Debian's slurm-wlm + munge (apt-get install slurm-wlm munge). Apart from
# /etc/slurm/slurm.conf nothing outside STATE_DIR is written: munge gets its own key and socket, slurm its
# own spool, logs and pid files.
set -euo pipefail
STATE=$(realpath -m "${1:-/tmp/pixelpipe-slurm}")
CTLD_PORT=${PIXELPIPE_SLURMCTLD_PORT:-6817}
SLURMD_PORT=${PIXELPIPE_SLURMD_PORT:-6818}
MIN_JOB_AGE=${PIXELPIPE_SLURM_MIN_JOB_AGE:-3600}  # finished jobs stay visible to squeue this long
NODES=${PIXELPIPE_SLURM_NODES:-1}

die() { echo "slurm-up: $*" >&2; exit 2; }
[[ "$NODES" =~ ^[1-9][0-9]?$ ]] || die "PIXELPIPE_SLURM_NODES must be a node count (1-99), got '$NODES'"
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

# slurm.conf: this host as the one node, its CPUs and a bit less memory than it has; or NODES node entries
# on this host (same address, a port each, the CPUs and memory split between them).
HOST=$(hostname -s)
read -r CPUS SOCKETS CORES THREADS MEM < <(slurmd -C | awk -F'[ =]' '/^NodeName/ {
  for (i = 1; i < NF; i++) v[$i] = $(i + 1); print v["CPUs"], v["SocketsPerBoard"], v["CoresPerSocket"], v["ThreadsPerCore"], v["RealMemory"] }')
MEM=$((MEM * 9 / 10))
if [ "$NODES" = 1 ]; then
  NODE_NAMES=$HOST
  NODE_LINES="NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS SocketsPerBoard=$SOCKETS CoresPerSocket=$CORES ThreadsPerCore=$THREADS RealMemory=$MEM State=UNKNOWN"
else
  NODE_CPUS=$((CPUS / NODES > 0 ? CPUS / NODES : 1))
  NODE_NAMES="" NODE_LINES=""
  for i in $(seq "$NODES"); do
    NODE_NAMES+="${NODE_NAMES:+,}pp-node$i"
    NODE_LINES+="NodeName=pp-node$i NodeHostname=$HOST NodeAddr=127.0.0.1 Port=$((SLURMD_PORT + i - 1)) CPUs=$NODE_CPUS RealMemory=$((MEM / NODES)) State=UNKNOWN"$'\n'
  done
fi
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
# %n: the node name, so that several slurmd on this host keep apart
SlurmdSpoolDir=$STATE/spool/%n
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd-%n.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd-%n.log
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
$NODE_LINES
# The partition names profiles/slurm uses; both on every node.
PartitionName=cpu Nodes=$NODE_NAMES Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$NODE_NAMES MaxTime=INFINITE State=UP
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
for name in ${NODE_NAMES//,/ }; do
  mkdir -p "$STATE/spool/$name"
  slurmd -f "$SLURM_CONF" -N "$name"
done
for _ in $(seq 60); do
  states=$(sinfo -h -N -n "$NODE_NAMES" -o "%N %T" 2>/dev/null | sort -u || true)  # a line per node and partition
  if [ "$(grep -cE ' (idle|mixed|allocated)$' <<< "$states")" = "$NODES" ]; then
    echo "export SLURM_CONF=$SLURM_CONF"
    exit 0
  fi
  grep -qE " (down|drain)" <<< "$states" && { scontrol update nodename="$NODE_NAMES" state=resume 2>/dev/null || true; }
  sleep 0.5
done
die "nodes $NODE_NAMES did not all become idle (states: ${states//$'\n'/, }): see $STATE/log/"
