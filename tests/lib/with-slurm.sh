#!/usr/bin/env bash
# with-slurm.sh COMMAND...: runs COMMAND (as root) with a single-node Slurm
# cluster of this machine on loopback: munged, slurmctld and slurmd from a
# configuration generated in a temporary directory, on ports off the
# defaults. COMMAND gets SLURM_CONF and MULLET_SLURM_CLUSTER=1; the daemons
# are stopped by pid when it ends, also when it fails.
set -euo pipefail
[ "$(id -u)" -eq 0 ] || {
  echo "with-slurm.sh: starting a Slurm cluster needs root" >&2
  exit 1
}
for tool in munged mungekey slurmctld slurmd sinfo; do
  command -v "$tool" >/dev/null || {
    echo "with-slurm.sh: $tool is missing: run scripts/install-deps (slurm-wlm, munge)" >&2
    exit 1
  }
done

dir="$(mktemp -d /tmp/mullet-slurm.XXXXXX)"
chmod 755 "$dir"
pids=()
stop_cluster() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    # Bounded: a daemon that ignores SIGTERM is killed.
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  rm -rf "$dir"
}
trap stop_cluster EXIT

# munge: its own key, socket and files, as the munge user.
mkdir -p "$dir/munge"
mungekey -c -k "$dir/munge/munge.key" 2>/dev/null || mungekey --create --keyfile="$dir/munge/munge.key"
chown -R munge: "$dir/munge"
chmod 700 "$dir/munge"
mkdir -p "$dir/munge-socket"
chown munge: "$dir/munge-socket"
chmod 755 "$dir/munge-socket"
socket="$dir/munge-socket/munge.socket"
runuser -u munge -- munged -F --force --socket="$socket" --key-file="$dir/munge/munge.key" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed" >/dev/null 2>&1 &
pids+=($!)

host="$(hostname -s)"
cpus="$(nproc)"
memory_mb=$(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 * 9 / 10))
port=$((20000 + RANDOM % 20000))
mkdir -p "$dir/state" "$dir/spool"
cat >"$dir/slurm.conf" <<EOF
ClusterName=mullettest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ReturnToService=2
MinJobAge=300
KillWait=30
MpiDefault=none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory_mb State=UNKNOWN
PartitionName=main Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
chmod 644 "$dir/slurm.conf"
export SLURM_CONF="$dir/slurm.conf"

# Wait for munge's socket, then for the controller, then for the node idle:
# events polled in bounded loops.
wait_for() {
  local what="$1" limit="$2"
  shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "with-slurm.sh: $what within ${limit}s; logs in $dir:" >&2
      tail -n 20 "$dir"/*.log "$dir"/munge/*.log >&2 2>/dev/null || true
      exit 1
    fi
    sleep 0.2
  done
}
wait_for "munged did not listen" 30 test -S "$socket"
slurmctld -D -i -f "$SLURM_CONF" >/dev/null 2>&1 &
pids+=($!)
wait_for "slurmctld did not answer" 60 scontrol ping
slurmd -D -f "$SLURM_CONF" >/dev/null 2>&1 &
pids+=($!)
wait_for "the node did not become idle" 60 sh -c "sinfo -h -N -o %t | grep -x idle"

export MULLET_SLURM_CLUSTER=1
code=0
"$@" || code=$?
exit "$code"
