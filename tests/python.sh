#!/bin/sh
# python.sh BUILD_DIR SCRATCH [SHARED_DIR] — the Python binding as a user installs it: `pip install
# ./python`, straight from the source tree (which must be left as it was: no build/, no egg-info),
# into interpreters built differently: Debian's python3 in a venv without system site packages, a
# venv made --without-pip then given pip by ensurepip, and pyenv's interpreters where there are any.
# In each, `import octo` with no environment variable (the wheel carries libocto.so.0) streams the
# text `octo run` prints. Then the pytest suite, in a venv with Debian's pytest, and the binding's
# statistics against octo.h's list (OCTO_STATS).
set -u
data=""
[ -n "${3:-}" ] && [ -d "$3" ] && data=$(cd "$3" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
mkdir -p "$2/python-$$" || exit 1
tmp=$(cd "$2/python-$$" && pwd)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3
$py -c "import pytest, venv, ensurepip" 2>/dev/null || { echo "skipped: python3-pytest / python3-venv missing (scripts/setup.sh)"; exit 77; }
failed=0
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
model=$here/models/stories260K.gguf
"$build/octo" run -m "$model" -p "Once upon a time" -n 48 --temp 0 2>/dev/null | head -c -1 >"$tmp/want" # (run ends with a newline)
cat >"$tmp/stream.py" <<'PY'
import sys
import octo
m = octo.Model(sys.argv[1])
sys.stdout.write("".join(m.generate("Once upon a time", max_tokens=48, temperature=0)))
PY
tree() { (cd "$here/python" && find . | sort); }
tree >"$tmp/tree.before"

# the library the wheels bundle: the README's build as the backend finds it, or the build under test
lib_env=""
[ "$build" = "$here/build" ] || lib_env="OCTO_LIBRARY=$build/lib/libocto.so.0"

# install and stream: $1 a venv's python, $2 its name in messages
check() {
    (cd "$tmp" && env $lib_env "$1" -m pip install -q --disable-pip-version-check "$here/python") >"$tmp/pip.log" 2>&1 ||
        { bad "$2: pip install ./python: $(tail -5 "$tmp/pip.log")"; return; }
    (cd "$tmp" && env -u OCTO_LIBRARY -u LD_LIBRARY_PATH "$1" "$tmp/stream.py" "$model") >"$tmp/got" 2>"$tmp/err" &&
        cmp -s "$tmp/got" "$tmp/want" && echo "python.sh: $2 ($("$1" -c 'import sys; print(sys.version.split()[0])')): the text of octo run" ||
        bad "$2: import octo and stream: $(cat "$tmp/err") '$(cat "$tmp/got")'"
}
$py -m venv "$tmp/debian" && check "$tmp/debian/bin/python" "Debian's python3, a venv without system site packages"
$py -m venv --without-pip "$tmp/ensurepip" && "$tmp/ensurepip/bin/python" -m ensurepip >/dev/null 2>&1 &&
    check "$tmp/ensurepip/bin/python" "a venv made --without-pip, pip from ensurepip"
for p in "$HOME"/.pyenv/versions/3.9*/bin/python3 "$HOME"/.pyenv/versions/3.13*/bin/python3; do # the oldest and newest taken
    [ -x "$p" ] || continue
    v=$(basename "$(dirname "$(dirname "$p")")")
    "$p" -m venv "$tmp/pyenv-$v" && check "$tmp/pyenv-$v/bin/python" "pyenv's $v"
done
tree >"$tmp/tree.after"
cmp -s "$tmp/tree.before" "$tmp/tree.after" && echo "python.sh: the source tree is as it was" ||
    bad "pip left files in python/: $(diff "$tmp/tree.before" "$tmp/tree.after" | grep '^>' | head -5)"

# the pytest suite, with Debian's pytest (system site packages), the library from the wheel
$py -m venv --system-site-packages "$tmp/venv" || exit 1
(cd "$tmp" && env $lib_env "$tmp/venv/bin/pip" install -q --disable-pip-version-check "$here/python") || exit 1
cd "$tmp" # import the installed package, not the source folder
env -u OCTO_LIBRARY PYTHONDONTWRITEBYTECODE=1 OCTO_BIN="$build/octo" OCTO_TEST_DATA="$data" OCTO_HEADER="$here/include/octo.h" \
    "$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider "$here/python/tests" || failed=$((failed + 1))
[ "$failed" -eq 0 ]
