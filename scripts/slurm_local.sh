#!/usr/bin/env bash
# A single-node SLURM on this machine, for tests/test_slurm.py (and to try `marl sweep --executor slurm`).
#
#   scripts/slurm_local.sh          # install (apt, Debian/Ubuntu) when sbatch is missing, configure, start
#   scripts/slurm_local.sh stop     # stop slurmd, slurmctld and munged (started by this script)
#
# Needs root: run it as root (no sudo needed: a container's root has none), or as another user with sudo, which
# it then asks for itself. Writes /etc/slurm/slurm.conf (a minimal one: this host as the only node with its real CPUs and
# memory, one partition "debug", proctrack/linuxproc, task/none, no accounting) unless it was not written by
# this script, starts munged, slurmctld and slurmd as daemons (no systemd needed) and waits until the node is
# idle. Running it again while the daemons are up only checks them. Exit status 0: `sbatch` works.
set -euo pipefail
MARK="# written by marl scripts/slurm_local.sh"
CONF=/etc/slurm/slurm.conf
LOG=/var/log/slurm

if [[ $EUID != 0 ]]; then
    if command -v sudo >/dev/null; then
        exec sudo -- "$0" "$@"
    fi
    echo "slurm_local.sh: needs root (it installs packages and starts daemons) and there is no sudo here: run it as root" >&2
    exit 1
fi
if [[ "${1:-}" == "stop" ]]; then
    for p in slurmd slurmctld; do
        [[ -f /run/$p.pid ]] && kill "$(cat /run/$p.pid)" 2>/dev/null || true
    done
    [[ -f /run/munge/munged.pid ]] && kill "$(cat /run/munge/munged.pid)" 2>/dev/null || true
    exit 0
fi
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null || ! command -v sbatch >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq </dev/null
    apt-get install -y -qq slurm-wlm munge </dev/null >/dev/null
fi

# munge: one key, the daemon as the munge user
if [[ ! -s /etc/munge/munge.key ]]; then
    (command -v mungekey >/dev/null && mungekey --create --keyfile=/etc/munge/munge.key) \
        || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
fi
chown -R munge:munge /etc/munge && chmod 700 /etc/munge && chmod 400 /etc/munge/munge.key
mkdir -p /run/munge /var/log/munge /var/lib/munge && chown munge:munge /run/munge /var/log/munge /var/lib/munge
if ! munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
    su -s /bin/sh munge -c "/usr/sbin/munged --force" </dev/null
    for _ in $(seq 50); do munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.2; done
fi

# slurm.conf: this host, its CPUs and memory as slurmd sees them
host=$(hostname -s)
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd "$LOG"
if [[ ! -f $CONF ]] || grep -qF "$MARK" "$CONF"; then
    node=$(slurmd -C 2>/dev/null | head -1)  # NodeName=HOST CPUs=.. Boards=.. ... RealMemory=..
    [[ $node == NodeName=* ]] || node="NodeName=$host CPUs=$(nproc) RealMemory=$(($(awk '/MemTotal/{print $2}' /proc/meminfo) / 1024 - 256))"
    cat > "$CONF.tmp" <<CONF
$MARK
ClusterName=local
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
KillWait=30
# a requeued job may start again after cred_expire seconds (default 120)
AuthInfo=cred_expire=10
MinJobAge=600
InactiveLimit=0
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd.log
$node State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
    mv "$CONF.tmp" "$CONF"
fi

alive() { [[ -f /run/$1.pid ]] && kill -0 "$(cat /run/$1.pid)" 2>/dev/null; }
alive slurmctld || /usr/sbin/slurmctld </dev/null
alive slurmd || /usr/sbin/slurmd </dev/null
for i in $(seq 120); do
    state=$(sinfo -h -n "$host" -o %T 2>/dev/null | head -1 || true)
    case "$state" in
        idle|mixed|allocated) echo "slurm_local.sh: SLURM up, node $host $state"; exit 0 ;;
        drain*|down*) scontrol update NodeName="$host" State=RESUME >/dev/null 2>&1 || true ;;
    esac
    sleep 0.5
done
echo "slurm_local.sh: the node did not become idle (state: ${state:-none}); see $LOG/slurmctld.log and $LOG/slurmd.log" >&2
exit 1
