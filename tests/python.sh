#!/bin/sh
# python.sh BUILD_DIR SCRATCH [SHARED_DIR] — the Python binding as a user installs it: a fresh
# venv (--system-site-packages: Debian's setuptools and pytest), `pip install --no-index
# --no-build-isolation ./python`, then its pytest suite against the library built in BUILD_DIR
# (and the binding's statistics against octo.h's list, OCTO_STATS).
set -u
data=""
[ -n "${3:-}" ] && [ -d "$3" ] && data=$(cd "$3" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
mkdir -p "$2/python-$$" || exit 1
tmp=$(cd "$2/python-$$" && pwd)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3
$py -c "import pytest, venv" 2>/dev/null || { echo "skipped: python3-pytest / python3-venv missing (scripts/setup.sh)"; exit 77; }
$py -m venv --system-site-packages "$tmp/venv" || exit 1
# a copy of the package: pip builds in place and must not leave build/ in the tree
cp -r "$here/python" "$tmp/src"
"$tmp/venv/bin/pip" install -q --no-index --no-build-isolation "$tmp/src" || exit 1
cd "$tmp" # import the installed package, not the source folder
OCTO_LIBRARY="$build/lib/libocto.so" OCTO_BIN="$build/octo" OCTO_TEST_DATA="$data" OCTO_HEADER="$here/include/octo.h" \
    "$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider "$tmp/src/tests"
