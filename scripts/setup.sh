#!/bin/sh
# setup.sh — install what octo needs to build and test on Debian.
# Safe to run again; does nothing when everything is present.
#   build:  cmake, a C compiler (gcc), make; pkg-config (tests/install.sh builds against the installed octo)
#   tests:  clang and its runtime (sanitizer build, libFuzzer target), valgrind
#   server: libmicrohttpd-dev, libcjson-dev (octo serve), curl and nodejs/npm (its tests' clients),
#           chromium (the chat page's test, driven by playwright-core from npm)
#   chat:   libedit-dev (line editing and history in run --chat on a terminal)
#   pull:   libcurl4-openssl-dev (octo pull: models from the Hugging Face hub or a URL)
#   jvm:    openjdk-17-jdk-headless, junit5, kotlin (bindings/jvm: the JNI library, dev.octo, its JUnit tests
#           and the Kotlin example)
#   python: python3-venv, python3-pytest (tests/python.sh: the binding in a fresh venv),
#           python3-jsonschema (an independent validator of the structured-output tests)
#   arm:    gcc-aarch64-linux-gnu, qemu-user (scripts/test-arm.sh: cross build + qemu)
#   musl:   musl-tools (.ci/run: the library, the CLI and their tests built with musl-gcc)
#   bench:  python3-numpy for ../shared/tools/widen.py (the 1.1B fixtures of docs/speculative.md)
set -e
need=""
command -v cmake >/dev/null 2>&1 || need="$need cmake"
command -v gcc >/dev/null 2>&1 || need="$need gcc"
command -v make >/dev/null 2>&1 || need="$need make"
command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"
pkg-config --exists libmicrohttpd 2>/dev/null || need="$need libmicrohttpd-dev"
pkg-config --exists libcjson 2>/dev/null || need="$need libcjson-dev"
pkg-config --exists libedit 2>/dev/null || need="$need libedit-dev"
pkg-config --exists libcurl 2>/dev/null || need="$need libcurl4-openssl-dev"
command -v javac >/dev/null 2>&1 || need="$need openjdk-17-jdk-headless"
[ -f /usr/share/java/junit-platform-console-standalone.jar ] || need="$need junit5"
command -v kotlinc >/dev/null 2>&1 || need="$need kotlin"
command -v curl >/dev/null 2>&1 || need="$need curl"
command -v node >/dev/null 2>&1 || need="$need nodejs"
command -v npm >/dev/null 2>&1 || need="$need npm"
command -v chromium >/dev/null 2>&1 || need="$need chromium"
command -v clang >/dev/null 2>&1 || need="$need clang"
command -v valgrind >/dev/null 2>&1 || need="$need valgrind"
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || need="$need gcc-aarch64-linux-gnu"
command -v qemu-aarch64 >/dev/null 2>&1 || need="$need qemu-user"
command -v musl-gcc >/dev/null 2>&1 || need="$need musl-tools"
/usr/bin/python3 -c "import numpy" >/dev/null 2>&1 || need="$need python3-numpy"
/usr/bin/python3 -c "import pytest" >/dev/null 2>&1 || need="$need python3-pytest"
/usr/bin/python3 -c "import ensurepip" >/dev/null 2>&1 || need="$need python3-venv"
/usr/bin/python3 -c "import jsonschema" >/dev/null 2>&1 || need="$need python3-jsonschema"
# libFuzzer and the sanitizer runtimes ship in libclang-rt-<version>-dev
if command -v clang >/dev/null 2>&1; then
    ver=$(clang -dumpversion | cut -d. -f1)
    ls /usr/lib/llvm-"$ver"/lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a >/dev/null 2>&1 || need="$need libclang-rt-$ver-dev"
else
    need="$need libclang-rt-dev"
fi
if [ -n "$need" ]; then
    echo "setup: installing$need"
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $need
fi
