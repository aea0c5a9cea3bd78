# CPU accounting shared by the benchmarks (sourced, not run): busy time
# of the client's and the server's core from /proc/stat, and a process's
# own CPU time. The caller sets CLIENT_CORE and SERVER_CORE.

HZ=$(getconf CLK_TCK)

# Busy jiffies of the client's and the server's core together
# (user+nice+system+irq+softirq+steal).
cores_busy() {
    awk -v a="cpu$CLIENT_CORE" -v b="cpu$SERVER_CORE" \
        '$1 == a || $1 == b {s += $2 + $3 + $4 + $7 + $8 + $9} END {print s}' /proc/stat
}
# irq + softirq jiffies of the same two cores: the kernel's packet work
# wherever it ran (compilers and other busy processes add little here).
cores_irq() {
    awk -v a="cpu$CLIENT_CORE" -v b="cpu$SERVER_CORE" \
        '$1 == a || $1 == b {s += $7 + $8} END {print s}' /proc/stat
}
# User+system jiffies of process PID.
proc_cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# Of it, the time in the kernel (system calls: TAP reads and writes for
# oxnet, the whole TCP/IP stack for Linux's servers).
proc_sys() { awk '{print $15}' "/proc/$1/stat"; }
# Jiffies as seconds: jiffies_s BEFORE AFTER.
jiffies_s() { awk -v d=$(($2 - $1)) -v hz="$HZ" 'BEGIN {printf "%.3f", d / hz}'; }
