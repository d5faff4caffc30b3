#!/bin/bash
# Stops the one-node Slurm of tools/start_slurm.sh: slurmd, slurmctld and munged, by their pid
# files. --purge also removes Slurm's state and spool folders, its logs and slurm.conf.
set -u
[ "$(id -u)" = 0 ] || { echo "stop_slurm: must run as root" >&2; exit 1; }
# Only what tools/start_slurm.sh started: a configuration it did not write is a real
# cluster's, whose daemons are not this script's to stop.
if [ -e /etc/slurm/slurm.conf ] && ! head -n 1 /etc/slurm/slurm.conf | grep -qx '# written by tools/start_slurm.sh'; then
  echo "stop_slurm: /etc/slurm/slurm.conf is not tools/start_slurm.sh's; nothing stopped or removed" >&2
  exit 1
fi
stop() {  # stop NAME PIDFILE
  [ -s "$2" ] || { echo "stop_slurm: $1 not running (no $2)"; return 0; }
  local pid; pid=$(cat "$2")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && { kill -9 "$pid"; sleep 0.2; }
    echo "stop_slurm: stopped $1 (pid $pid)"
  else
    echo "stop_slurm: $1 not running (stale $2)"
  fi
  rm -f "$2"
}
stop slurmd /run/slurmd.pid
stop slurmctld /run/slurmctld.pid
stop munged /run/munge/munged.pid
if [ "${1:-}" = --purge ]; then
  rm -rf /var/spool/slurmctld /var/spool/slurmd /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log /run/munge /etc/slurm/slurm.conf
  echo "stop_slurm: removed state dirs, logs and slurm.conf"
fi
