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
#   - the installed octo runs the installed embedded model without -m, and each
#     program generates the text `octo run` gives from it;
#   - the JVM jar and JNI library install, and a Java program runs from the prefix.
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
said=$(sed -n 's/.*exports only the \([0-9]*\) `octo_\*` functions.*/\1/p' "$here/../README.md")
[ "$said" = "$api" ] || bad "the README says libocto.so exports ${said:-an unstated number of} functions, octo.h declares $api"
others=$(nm -g --defined-only "$libdir/libocto.a" 2>/dev/null | awk 'NF == 3 {print $3}' | grep -v '^octo_' || true)
[ -z "$others" ] || bad "libocto.a has globals other than octo_*: $(echo $others | head -c 300)"

# the embedded model, installed with the data: the installed octo runs it without -m (the prefix is
# not the configured one: it is found beside the binary, not at a path fixed when it was built)
model=$tmp/prefix/share/octo/models/stories260K.gguf
[ -f "$model" ] || bad "the embedded model is not installed at share/octo/models"
want=$("$tmp/prefix/bin/octo" run -m "$model" -p "Once upon a time" -n 8 --temp 0 --spec auto 2>/dev/null)
[ -n "$want" ] || bad "the installed octo generated nothing from $model"
"$tmp/prefix/bin/octo" run -p "Once upon a time" -n 8 --temp 0 --spec auto >"$tmp/emb.out" 2>"$tmp/emb.err"
grep -q "running the embedded stories260K.*(/.*/prefix/bin/\.\./share/octo/models/stories260K.gguf)" "$tmp/emb.err" &&
    [ "$(cat "$tmp/emb.out")" = "$want" ] || bad "the installed octo without -m: $(cat "$tmp/emb.err")"

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
# no LD_LIBRARY_PATH: the .pc's link line records where libocto.so.0 is (a prefix off the loader's path)
out=$(env -u LD_LIBRARY_PATH "$tmp/hello_pc" $model) || bad "pkg-config program failed (no LD_LIBRARY_PATH)"
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
# the JVM binding, where this build has it: octo.jar and liboctojni.so installed, a program run from the prefix
jar=$tmp/prefix/share/java/octo.jar
if [ -f "$build/lib/octo.jar" ]; then
    [ -f "$jar" ] && [ -f "$libdir/liboctojni.so" ] || bad "octo.jar or liboctojni.so not installed"
    mkdir -p "$tmp/java"
    if javac -d "$tmp/java" -cp "$jar" "$here/install/Hello.java" 2>"$tmp/javac.err"; then
        got=$(env -u LD_LIBRARY_PATH java -Djava.library.path="$libdir" -cp "$jar:$tmp/java" Hello "$model" 2>"$tmp/java.err")
        [ "$got" = "$want" ] || bad "the installed JVM binding: '$got' (octo run: '$want'): $(tail -3 "$tmp/java.err")"
    else
        bad "javac against the installed octo.jar: $(tail -3 "$tmp/javac.err")"
    fi
else
    echo "note: this build has no JVM binding (no JDK): its install was not checked"
fi
[ "$failed" -eq 0 ] && echo "install: all passed" || echo "install: $failed failed"
[ "$failed" -eq 0 ]
