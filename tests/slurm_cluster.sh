# slurm_cluster.sh - sourced by tests/t_slurm.sh: a one-node Slurm cluster on this machine,
# private to the test: munged, slurmctld and slurmd started from the installed packages
# (Debian's munge and slurm-wlm; scripts/install-deps.sh --with-slurm) with a key, a
# slurm.conf, state and spool directories and logs in the directory $SC, talking over the
# loopback address only, on ports picked from the process id. Nothing is installed and nothing
# outside $SC is written; slurm_stop ends the three daemons by their process ids.
#
#   SC=DIR; slurm_start || skip "$slurm_why"   # exports SLURM_CONF; slurm_why says what failed
#   ...  sbatch, squeue, ampdiag sweep --launcher slurm ...
#   slurm_stop
slurm_pids=""
slurm_why=""

# the tail of a daemon's log, as TAP comments
slurm_log() { [ -f "$1" ] && tail -n 5 "$1" | sed 's/^/# /'; }

slurm_start() {
    for b in munged slurmctld slurmd sbatch squeue scancel sinfo; do
        if ! command -v "$b" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$b" ]; then
            slurm_why="$b not found (Slurm and munge are not installed: scripts/install-deps.sh --with-slurm)"
            return 1
        fi
    done
    PATH="$PATH:/usr/sbin"
    chmod 700 "$SC" && mkdir -p "$SC/state" "$SC/spool" || { slurm_why="cannot prepare $SC"; return 1; }
    dd if=/dev/urandom of="$SC/munge.key" bs=1024 count=1 2>/dev/null && chmod 400 "$SC/munge.key" ||
        { slurm_why="cannot write a munge key"; return 1; }
    munged -F -f --key-file="$SC/munge.key" --socket="$SC/munge.sock" --pid-file="$SC/munged.pid" \
        --log-file="$SC/munged.log" --seed-file="$SC/munge.seed" >"$SC/munged.out" 2>&1 &
    slurm_pids="$!"
    i=0
    while [ ! -S "$SC/munge.sock" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    if [ ! -S "$SC/munge.sock" ]; then
        slurm_why="munged did not start"
        slurm_log "$SC/munged.out"
        return 1
    fi
    host=$(hostname -s 2>/dev/null || hostname)
    user=$(id -un)
    port=$((20000 + $$ % 20000))
    cat >"$SC/slurm.conf" <<CONF
ClusterName=ampdiagtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$SC/munge.sock
CredType=cred/munge
SlurmUser=$user
SlurmdUser=$user
StateSaveLocation=$SC/state
SlurmdSpoolDir=$SC/spool
SlurmctldPidFile=$SC/slurmctld.pid
SlurmdPidFile=$SC/slurmd.pid
SlurmctldLogFile=$SC/slurmctld.log
SlurmdLogFile=$SC/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
MinJobAge=30
KillWait=10
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
    SLURM_CONF="$SC/slurm.conf"
    export SLURM_CONF
    slurmctld -D -i >"$SC/slurmctld.out" 2>&1 &
    slurm_pids="$slurm_pids $!"
    slurmd -D >"$SC/slurmd.out" 2>&1 &
    slurm_pids="$slurm_pids $!"
    i=0
    while [ $i -lt 60 ]; do
        state=$(sinfo -h -o %t 2>/dev/null)
        [ "$state" = idle ] && return 0
        sleep 0.5
        i=$((i + 1))
    done
    slurm_why="the node did not come up (sinfo: '${state:-no answer}')"
    slurm_log "$SC/slurmctld.log"
    slurm_log "$SC/slurmctld.out"
    slurm_log "$SC/slurmd.log"
    slurm_log "$SC/slurmd.out"
    return 1
}

slurm_stop() {
    for p in $slurm_pids; do
        kill "$p" 2>/dev/null
    done
    for p in $slurm_pids; do
        wait "$p" 2>/dev/null
    done
    slurm_pids=""
}
