#!/bin/sh
# install.sh BUILD_DIR SCRATCH [SHARED_DIR] — octo as others get it: `cmake --install`
# into a scratch prefix, then
#   - the shared library exports only octo_* (nm -D), and libocto.a has no
#     other global symbol (nm -g --defined-only);
#   - a program outside the tree built with pkg-config (shared), and one
#     linked statically beside functions named as octo's internals (and
#     ggml's), both run;
#   - a CMake project using find_package(octo) builds and runs, with
#     octo::octo and octo::octo_static.
# With SHARED_DIR/models/stories260K.gguf each program also generates text,
# and the texts must match `octo run`'s.
set -u
build=$1
mkdir -p "$2/install-$$" || exit 1
tmp=$(cd "$2/install-$$" && pwd) # absolute: the CMake project below runs elsewhere
shared=${3:-}
trap 'rm -rf "$tmp"' EXIT
here=$(cd "$(dirname "$0")" && pwd)
failed=0
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
command -v pkg-config >/dev/null || { echo "skipped: no pkg-config (scripts/setup.sh installs it)"; exit 77; }

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null || { echo "FAIL: cmake --install" >&2; exit 1; }
pc=$(find "$tmp/prefix" -name octo.pc | head -1)
[ -n "$pc" ] || { echo "FAIL: no octo.pc installed" >&2; exit 1; }
libdir=$(dirname "$(dirname "$pc")")
export PKG_CONFIG_PATH="$(dirname "$pc")"
for f in include/octo.h bin/octo; do [ -e "$tmp/prefix/$f" ] || bad "$f not installed"; done
[ -e "$libdir/libocto.a" ] && [ -e "$libdir/libocto.so" ] || bad "libraries not installed in $libdir"
soname=$(objdump -p "$libdir/libocto.so" | awk '/SONAME/ {print $2}')
[ "$soname" = "libocto.so.0" ] || bad "SONAME is '$soname'"

others=$(nm -D --defined-only "$libdir/libocto.so" | awk '{print $3}' | grep -v '^octo_' | grep -v '^_' || true)
[ -z "$others" ] || bad "libocto.so exports more than octo_*: $(echo $others | head -c 300)"
n=$(nm -D --defined-only "$libdir/libocto.so" | grep -c ' T octo_')
api=$(grep -c '^OCTO_API' "$here/../include/octo.h") # every function the header declares, exported
[ "$n" -eq "$api" ] || bad "libocto.so exports $n octo_ functions, octo.h declares $api"
others=$(nm -g --defined-only "$libdir/libocto.a" 2>/dev/null | awk 'NF == 3 {print $3}' | grep -v '^octo_' || true)
[ -z "$others" ] || bad "libocto.a has globals other than octo_*: $(echo $others | head -c 300)"

model=""
[ -n "$shared" ] && [ -f "$shared/models/stories260K.gguf" ] && model=$shared/models/stories260K.gguf
want=""
[ -n "$model" ] && want=$("$tmp/prefix/bin/octo" run -m "$model" -p "Once upon a time" -n 8 --temp 0 --spec auto 2>/dev/null)

# check NAME OUTPUT: the version line, then the text octo run gives
check() {
    ver=$(printf '%s\n' "$2" | head -1)
    [ "$ver" = "octo $("$tmp/prefix/bin/octo" --version | awk '{print $2}')" ] || bad "$1: version line '$ver'"
    if [ -n "$model" ]; then
        got=$(printf '%s\n' "$2" | sed -n 2p)
        [ "$got" = "$want" ] || bad "$1: text '$got', octo run gives '$want'"
    fi
}
cc -o "$tmp/hello_pc" "$here/install/hello.c" $(pkg-config --cflags --libs octo) || bad "pkg-config build"
out=$(LD_LIBRARY_PATH="$libdir" "$tmp/hello_pc" $model) || bad "pkg-config program failed"
check pkg-config "$out"
cc -o "$tmp/hello_static" "$here/install/hello.c" "$here/install/ggml_names.c" $(pkg-config --cflags octo) \
    "$libdir/libocto.a" -lm -pthread || bad "static link beside ggml's names"
out=$("$tmp/hello_static" $model) || bad "static program failed"
check static "$out"
cmake -S "$here/install" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null &&
    cmake --build "$tmp/consumer" >/dev/null || bad "find_package(octo) project did not build"
for p in hello_shared hello_static; do
    out=$("$tmp/consumer/$p" $model) || bad "find_package program $p failed"
    check "find_package $p" "$out"
done
[ "$failed" -eq 0 ] && echo "install: all passed" || echo "install: $failed failed"
[ "$failed" -eq 0 ]
