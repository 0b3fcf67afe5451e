#!/bin/sh
# memwatch_real.sh [BUILD_DIR [LIMIT_MIB [TAKE_MIB]]] — the memory watcher (src/platform/memwatch.h)
# on this machine: a report, not a test. First its cost when idle (10 s, polls of 100 and 50 ms),
# then issue 37's scenario through ../shared/tools/pressure.sh: this process holds 520 MiB of a
# file in page cache and 520 MiB private in a cgroup capped at LIMIT_MIB (1400); after 3 s another
# process takes TAKE_MIB (900). Once as is (the kernel kills the other), once giving the private
# memory back at LOW (the other should live). Needs root and a cgroup memory controller; run it
# under the CPU lock (flock /tmp/octo-cpu.lock sh tests/memwatch_real.sh build).
set -eu
cd "$(dirname "$0")/.."
b=${1:-build} lim=${2:-1400} take=${3:-900}
pressure=../shared/tools/pressure.sh
[ -x "$pressure" ] || pressure=/work/shared/tools/pressure.sh
f=$b/testtmp/memwatch-weights.bin
mkdir -p "$b/testtmp"
[ -f "$f" ] || dd if=/dev/zero of="$f" bs=1M count=520 status=none
echo "== idle"
"$b/memwatch_real" idle 10 100
"$b/memwatch_real" idle 10 50 | head -1
for mode in keep react; do
    echo "== under pressure: limit $lim MiB, the other takes $take MiB after 3 s ($mode)"
    "$pressure" "$lim" "$f" "$take" 3 12 -- "$b/memwatch_real" hold "$f" 520 9 $([ $mode = react ] && echo react) 2>&1 |
        grep -v '^\(import\|time\.sleep\|for i in\|open(sys\)'
done
