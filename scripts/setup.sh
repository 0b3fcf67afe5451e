#!/bin/sh
# setup.sh [run|test|ci] — install from Debian what octo needs, and no more than the step asks.
# Safe to run again; does nothing when everything is present.
#   run (the default; the README's first command): build it and run every command
#     cmake, gcc, make, pkg-config; libmicrohttpd-dev and libcjson-dev (octo serve),
#     libedit-dev (line editing in run --chat), libcurl4-openssl-dev (octo pull)
#   test (scripts/test.sh, the README's test command): run's, and what the tests drive
#     clang and libclang-rt (sanitizer build, libFuzzer), valgrind; curl, nodejs and npm (the
#     server's clients), chromium (the chat page's test, through playwright-core from npm);
#     openjdk-17-jdk-headless, junit5, kotlin (bindings/jvm and its tests); python3-venv,
#     python3-pytest, python3-jsonschema (the Python binding's tests)
#   ci (.ci/run): test's, and the other builds it checks
#     gcc-aarch64-linux-gnu, qemu-user (scripts/test-arm.sh), musl-tools (the musl build),
#     python3-numpy (../shared/tools/widen.py, the 1.1B fixtures of the benchmarks)
set -e
step=${1:-run}
case $step in run | test | ci) ;; *) echo "setup: the step is run, test or ci, not '$step'" >&2; exit 2 ;; esac
need=""
have() { command -v "$1" >/dev/null 2>&1; }
py() { /usr/bin/python3 -c "import $1" >/dev/null 2>&1; }
have cmake || need="$need cmake"
have gcc || need="$need gcc"
have make || need="$need make"
have pkg-config || need="$need pkg-config"
pkg-config --exists libmicrohttpd 2>/dev/null || need="$need libmicrohttpd-dev"
pkg-config --exists libcjson 2>/dev/null || need="$need libcjson-dev"
pkg-config --exists libedit 2>/dev/null || need="$need libedit-dev"
pkg-config --exists libcurl 2>/dev/null || need="$need libcurl4-openssl-dev"
if [ "$step" != run ]; then
    have javac || need="$need openjdk-17-jdk-headless"
    [ -f /usr/share/java/junit-platform-console-standalone.jar ] || need="$need junit5"
    have kotlinc || need="$need kotlin"
    have curl || need="$need curl"
    have node || need="$need nodejs"
    have npm || need="$need npm"
    have chromium || need="$need chromium"
    have valgrind || need="$need valgrind"
    py pytest || need="$need python3-pytest"
    py ensurepip || need="$need python3-venv"
    py jsonschema || need="$need python3-jsonschema"
    # libFuzzer and the sanitizer runtimes ship in libclang-rt-<version>-dev
    if have clang; then
        ver=$(clang -dumpversion | cut -d. -f1)
        ls /usr/lib/llvm-"$ver"/lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a >/dev/null 2>&1 || need="$need libclang-rt-$ver-dev"
    else
        need="$need clang libclang-rt-dev"
    fi
fi
if [ "$step" = ci ]; then
    have aarch64-linux-gnu-gcc || need="$need gcc-aarch64-linux-gnu"
    have qemu-aarch64 || need="$need qemu-user"
    have musl-gcc || need="$need musl-tools"
    py numpy || need="$need python3-numpy"
fi
if [ -n "$need" ]; then
    echo "setup ($step): installing$need"
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $need
fi
