#!/usr/bin/env bash
# A real single-machine SLURM cluster (Debian's slurm-wlm + munge) for tests and CI.
#
#   tools/slurm_local.sh start   [--nodes 1|2] [--cpus N] [--mem-mb MB] [--state-dir DIR]
#   tools/slurm_local.sh stop    [--state-dir DIR]
#   tools/slurm_local.sh status  [--state-dir DIR]
#   tools/slurm_local.sh install
#
# start: installs munge slurm-client slurmctld slurmd when missing (needs root and apt), writes
#   /etc/slurm/slurm.conf, starts munged, slurmctld and one slurmd per simulated node (n1, n2; both
#   on 127.0.0.1, distinct ports), waits until the nodes are idle and smoke-tests `srun -N1`.
#   Each node declares --cpus CPUs (default 4) and --mem-mb MB (default 80% of RAM, at least
#   8000), whatever the machine has (SlurmdParameters=config_overrides), so that jobs sized for
#   real nodes (the default benchmark matrix asks up to 3 CPUs and 4000 MB per node) run here.
#   Running it again while the cluster is up is fine. No accounting daemon: run snakemake with
#   `--slurm-status-command squeue` (MinJobAge=300 keeps finished jobs visible to squeue).
# Run as root, or as a user with sudo: the script then runs itself through sudo.
# install: only the package step of start (for CI images).
# stop: ends only the daemons this script started (pid files in the state dir); idempotent.
# Exit status: 0 ok, 1 failure, 2 usage, 3 cannot run here (not root / no apt / foreign config).
set -euo pipefail

STATE_DIR="${XDG_RUNTIME_DIR:-/tmp}/robopipe-slurm"
NODES=2
CPUS=4
MEM_MB=""
CONF=/etc/slurm/slurm.conf
MARKER="# written by robopipe tools/slurm_local.sh"
PACKAGES=(munge slurm-client slurmctld slurmd)

log() { echo "slurm_local: $*" >&2; }
die() { log "$2"; exit "$1"; }

usage() {
    sed -n '3,7p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

parse_args() {
    [[ $# -ge 1 ]] || usage
    ACTION=$1
    shift
    while [[ $# -gt 0 ]]; do
        case $1 in
            --nodes) NODES=${2:?}; shift 2 ;;
            --cpus) CPUS=${2:?}; shift 2 ;;
            --mem-mb) MEM_MB=${2:?}; shift 2 ;;
            --state-dir) STATE_DIR=${2:?}; shift 2 ;;
            *) usage ;;
        esac
    done
    [[ $NODES == 1 || $NODES == 2 ]] || die 2 "--nodes must be 1 or 2"
    [[ $CPUS =~ ^[1-9][0-9]*$ ]] || die 2 "--cpus must be a positive integer"
    [[ -z $MEM_MB || $MEM_MB =~ ^[1-9][0-9]*$ ]] || die 2 "--mem-mb must be a positive integer"
    case $ACTION in start | stop | status | install) ;; *) usage ;; esac
}

node_names() { if [[ $NODES == 2 ]]; then echo n1 n2; else echo n1; fi; }

# A pid file's process, if it is alive; nothing otherwise.
live_pid() {
    local pid
    [[ -s $1 ]] || return 1
    pid=$(<"$1")
    [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

install_packages() {
    local missing=() pkg
    for pkg in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
    done
    [[ ${#missing[@]} -eq 0 ]] && return 0
    command -v apt-get >/dev/null || die 3 "apt-get not found; install ${missing[*]} yourself"
    log "installing ${missing[*]}"
    # A policy-rc.d that exits 101 stops the package scripts from starting the daemons.
    local own_policy=0
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        own_policy=1
    fi
    local rc=0
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" \
        >"$STATE_DIR/apt.log" 2>&1 || rc=$?
    if [[ $rc -ne 0 ]]; then
        log "apt-get install failed; trying again after apt-get update"
        { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
            --no-install-recommends "${missing[@]}"; } >>"$STATE_DIR/apt.log" 2>&1 && rc=0 || rc=$?
    fi
    [[ $own_policy == 1 ]] && rm -f /usr/sbin/policy-rc.d
    [[ $rc -eq 0 ]] || die 3 "could not install ${missing[*]} (see $STATE_DIR/apt.log)"
}

# Writes the configuration to $CONF.new (cmd_start moves it into place).
write_conf() {
    if [[ -e $CONF ]] && ! grep -qF "$MARKER" "$CONF"; then
        die 3 "$CONF exists and was not written by this script; refusing to replace it"
    fi
    local mem_mb=$MEM_MB port=6818 name
    # RealMemory: about 80% of the machine's RAM, at least 8000 MB (each simulated node sees
    # all of it; nothing enforces it here, as there are no cgroups).
    [[ -n $mem_mb ]] || mem_mb=$(awk '/^MemTotal:/ {m = $2 * 0.8 / 1024; if (m < 8000) m = 8000; printf "%d", m}' /proc/meminfo)
    mkdir -p /etc/slurm "$STATE_DIR/ctld"
    {
        echo "$MARKER (state dir $STATE_DIR)"
        cat <<EOF
ClusterName=robopipe
SlurmctldHost=localhost
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/none
ReturnToService=2
MinJobAge=300
SlurmdParameters=config_overrides
StateSaveLocation=$STATE_DIR/ctld
SlurmctldPidFile=$STATE_DIR/slurmctld.pid
SlurmctldLogFile=$STATE_DIR/slurmctld.log
SlurmdPidFile=$STATE_DIR/slurmd-%n.pid
SlurmdSpoolDir=$STATE_DIR/spool/%n
SlurmdLogFile=$STATE_DIR/slurmd-%n.log
EOF
        for name in $(node_names); do
            echo "NodeName=$name NodeHostname=$name NodeAddr=127.0.0.1 Port=$port CPUs=$CPUS RealMemory=$mem_mb State=UNKNOWN"
            port=$((port + 2))
        done
        echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
    } >"$CONF.new"
}

start_munged() {
    if live_pid "$STATE_DIR/munged.pid" >/dev/null; then return 0; fi
    [[ -s /etc/munge/munge.key ]] || mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
    install -d -o munge -g munge -m 0755 /run/munge "$STATE_DIR/munge"
    install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
    runuser -u munge -- munged --pid-file="$STATE_DIR/munge/munged.pid" --force
    ln -sf munge/munged.pid "$STATE_DIR/munged.pid"
    munge -n | unmunge >/dev/null || die 1 "munged does not answer"
}

start_slurm() {
    local name
    if ! live_pid "$STATE_DIR/slurmctld.pid" >/dev/null; then
        slurmctld -c -i || die 1 "slurmctld failed to start (see $STATE_DIR/slurmctld.log)"
    fi
    for name in $(node_names); do
        mkdir -p "$STATE_DIR/spool/$name"
        if ! live_pid "$STATE_DIR/slurmd-$name.pid" >/dev/null; then
            slurmd -N "$name" || die 1 "slurmd $name failed to start (see $STATE_DIR/slurmd-$name.log)"
        fi
    done
}

wait_idle() {
    local want i states
    want=$(node_names | wc -w)
    for i in $(seq 1 60); do
        states=$(sinfo -h -N -o '%N %t' 2>/dev/null || true)
        if [[ $(grep -cE ' (idle|mix|alloc)$' <<<"$states") -ge $want ]]; then
            return 0
        fi
        # A node left down/drained by an earlier run comes back here.
        if grep -qE ' (down|drain|drng|drained)\*?$' <<<"$states"; then
            scontrol update NodeName="$(node_names | tr ' ' ,)" State=RESUME 2>/dev/null || true
        fi
        sleep 1
    done
    die 1 "nodes not idle after 60 s: $states"
}

cmd_start() {
    mkdir -p "$STATE_DIR"
    install_packages
    write_conf
    # A running cluster with other nodes (count, CPUs, memory) is restarted with the new ones.
    if [[ -e $CONF ]] && ! cmp -s "$CONF" "$CONF.new" && live_pid "$STATE_DIR/slurmctld.pid" >/dev/null; then
        cmd_stop
        mkdir -p "$STATE_DIR/ctld"
    fi
    mv "$CONF.new" "$CONF"
    start_munged
    start_slurm
    wait_idle
    srun -N1 -t 1 hostname >/dev/null || die 1 "smoke test 'srun -N1 hostname' failed"
    log "up: $(node_names | wc -w) node(s), state dir $STATE_DIR"
}

# Ends one daemon by its pid file: TERM, then KILL after 10 s.
stop_pid_file() {
    local pid i
    pid=$(live_pid "$1") || { rm -f "$1"; return 0; }
    kill "$pid" 2>/dev/null || true
    for i in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.2
    done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
    rm -f "$1"
}

cmd_install() {
    mkdir -p "$STATE_DIR"
    install_packages
}

cmd_stop() {
    [[ -d $STATE_DIR ]] || return 0
    local f
    for f in "$STATE_DIR"/slurmd-*.pid; do [[ -e $f ]] && stop_pid_file "$f"; done
    stop_pid_file "$STATE_DIR/slurmctld.pid"
    stop_pid_file "$STATE_DIR/munged.pid"
    rm -f "$STATE_DIR/munge/munged.pid"
    if [[ -e $CONF ]] && grep -qF "$MARKER (state dir $STATE_DIR)" "$CONF"; then rm -f "$CONF"; fi
    rm -rf "$STATE_DIR"
    log "stopped"
}

cmd_status() {
    local f ok=0
    for f in "$STATE_DIR"/munged.pid "$STATE_DIR"/slurmctld.pid "$STATE_DIR"/slurmd-*.pid; do
        if live_pid "$f" >/dev/null; then echo "$(basename "$f" .pid): running"; else
            echo "$(basename "$f" .pid): not running"
            ok=1
        fi
    done
    [[ $ok == 0 ]] && sinfo -N
    return $ok
}

# Root, or through sudo (the same arguments and state dir); status needs no root.
as_root() {
    [[ $(id -u) -eq 0 || $ACTION == status ]] && return 0
    command -v sudo >/dev/null || die 3 "must run as root (installs packages, writes $CONF); sudo not found"
    exec sudo -- bash "$0" "$ACTION" --nodes "$NODES" --cpus "$CPUS" ${MEM_MB:+--mem-mb "$MEM_MB"} \
        --state-dir "$STATE_DIR"
}

parse_args "$@"
as_root
"cmd_$ACTION"
