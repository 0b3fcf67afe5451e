#!/bin/sh
# test.sh — configure, build and run the whole test suite (the README's test command).
set -e
cd "$(dirname "$0")/.."
sh scripts/setup.sh test
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j 2
ctest --test-dir build --output-on-failure -j 2
