#!/bin/bash
# Starts a one-node Slurm cluster on this machine (Debian 12, Slurm 22.05) so that srun runs
# the multi-process tests as users' clusters do (example_seqgpt_ner_srun_*: seqgpt_ner on
# Open MPI, its wire-up from srun through PMIx). .ci/run calls it before the test suite; the
# tests report themselves skipped where no Slurm controller answers.
# Idempotent: (re)writes /etc/slurm/slurm.conf, starts munged, slurmctld and slurmd when they
# are not running, and waits (at most 60 s) until the node is idle and `srun -n 1 true` runs.
# Needs root and the packages of tools/setup.sh. tools/stop_slurm.sh stops it again.
# SLURM_NODE_CPUS (default 4) is the CPU count the node declares: 4 lets `srun -n 4` run on a
# 2-core machine (the tests' 4-rank plans) without oversubscription flags.
set -u
t0=$(date +%s%N)
say() { local ms=$(( ($(date +%s%N) - t0) / 1000000 )); printf '[start_slurm +%d.%03ds] %s\n' $((ms/1000)) $((ms%1000)) "$*"; }
die() { echo "start_slurm: ERROR: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root"

NODE=$(hostname -s)
CPUS=${SLURM_NODE_CPUS:-4}
LOGDIR=/var/log/slurm

# 1. packages (tools/setup.sh installs them) ------------------------------------------------
for c in slurmctld slurmd srun munged; do
  command -v "$c" >/dev/null || [ -x "/usr/sbin/$c" ] || die "$c not found; run tools/setup.sh"
done

# 2. config -----------------------------------------------------------------------------
# A Slurm configuration this script did not write is a real cluster's: never replaced.
if [ -e /etc/slurm/slurm.conf ] && ! head -n 1 /etc/slurm/slurm.conf | grep -qx '# written by tools/start_slurm.sh'; then
  die "/etc/slurm/slurm.conf is not this script's (a cluster is configured here); use that cluster's srun"
fi
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd "$LOGDIR" /run/munge
chown munge:munge /run/munge; chmod 0755 /run/munge
cat >/etc/slurm/slurm.conf.new <<EOF
# written by tools/start_slurm.sh
ClusterName=seqpar
SlurmctldHost=$NODE
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOGDIR/slurmctld.log
SlurmdLogFile=$LOGDIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# a node declaring more CPUs than it has is not drained:
SlurmdParameters=config_overrides
MpiDefault=pmix
MailProg=/bin/true
ReturnToService=2
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS Sockets=1 CoresPerSocket=$CPUS ThreadsPerCore=1 State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
conf_changed=0
if ! cmp -s /etc/slurm/slurm.conf.new /etc/slurm/slurm.conf; then
  mv /etc/slurm/slurm.conf.new /etc/slurm/slurm.conf; conf_changed=1
else
  rm -f /etc/slurm/slurm.conf.new
fi

# 3. daemons ------------------------------------------------------------------------------
# daemons are tracked by their pid files (never by name)
pidfile() { case $1 in munged) echo /run/munge/munged.pid;; *) echo /run/$1.pid;; esac; }
running() { local f; f=$(pidfile "$1"); [ -s "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null; }
stop_wait() {  # stop_wait NAME: SIGTERM the daemon and wait (<= 10 s) until it has exited
  running "$1" || return 0
  local pid; pid=$(cat "$(pidfile "$1")"); kill "$pid"
  for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null; sleep 0.2
}

if ! running munged; then
  [ -s /etc/munge/munge.key ] || { /usr/sbin/mungekey -c -f -k /etc/munge/munge.key && chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key; } \
    || die "cannot create /etc/munge/munge.key"
  say "starting munged"
  runuser -u munge -- /usr/sbin/munged || die "munged failed to start (see /var/log/munge/munged.log)"
fi
for i in $(seq 50); do munge -n </dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
munge -n </dev/null | unmunge >/dev/null 2>&1 || die "munge credential round trip fails"

if [ $conf_changed = 1 ] && { running slurmctld || running slurmd; }; then
  say "config changed: restarting slurmctld/slurmd"; stop_wait slurmd; stop_wait slurmctld
fi
if ! running slurmctld; then
  say "starting slurmctld"
  /usr/sbin/slurmctld || die "slurmctld failed to start (see $LOGDIR/slurmctld.log)"
fi
if ! running slurmd; then
  say "starting slurmd"
  /usr/sbin/slurmd || die "slurmd failed to start (see $LOGDIR/slurmd.log)"
fi

# 4. wait for idle (60 s in all) -----------------------------------------------------------
deadline=$(( $(date +%s) + 60 ))
fail() {
  echo "start_slurm: ERROR: $*" >&2
  sinfo -R >&2 2>&1; tail -n 5 $LOGDIR/slurmctld.log $LOGDIR/slurmd.log >&2
  exit 1
}
st=
while :; do
  sleep 0.2
  running slurmctld || fail "slurmctld exited (see $LOGDIR/slurmctld.log)"
  running slurmd || fail "slurmd exited (see $LOGDIR/slurmd.log)"
  [ "$(date +%s)" -ge "$deadline" ] && fail "node $NODE not idle after 60 s (state: '${st:-none}')"
  scontrol ping 2>/dev/null | grep -q UP || continue            # controller answers
  scontrol show slurmd >/dev/null 2>&1 || continue             # local slurmd answers
  st=$(sinfo -h -n "$NODE" -o '%T' 2>/dev/null | head -1)
  case "$st" in
    idle|mixed|allocated) break ;;                             # not idle* (not responding)
    down*|drain*|fail*) scontrol update NodeName="$NODE" State=RESUME >/dev/null 2>&1 ;;
    comp*)  # a step left over from a dead slurmd can hold the node 'completing' for minutes
      comp_n=$(( ${comp_n:-0} + 1 ))
      if [ $comp_n = 25 ]; then
        say "node stuck completing: cycling it DOWN/RESUME"
        scontrol update NodeName="$NODE" State=DOWN Reason=start_slurm.sh >/dev/null 2>&1
        scontrol update NodeName="$NODE" State=RESUME >/dev/null 2>&1
      fi ;;
  esac
done
# end-to-end check: a one-task step must run
left=$(( deadline - $(date +%s) )); [ $left -lt 5 ] && left=5
timeout $left srun -n 1 -t 1 true >/dev/null 2>&1 || fail "node $NODE is $st but 'srun -n 1 true' fails"
for i in $(seq 25); do [ "$(sinfo -h -n "$NODE" -o '%T' 2>/dev/null)" = idle ] && break; sleep 0.2; done
say "node $NODE is $st; srun works"
sinfo
