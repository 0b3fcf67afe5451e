#!/bin/sh
# check-layers.sh — every #include "..." in src/ and tools/ goes to its own
# layer or one below it (docs/architecture.md has the table), and only the
# platform room names the kernel's files (below). Run from the repository
# root; exits 1 and names each offending line when one does not. The bindings
# and examples (bindings/, examples/) may include octo.h alone.
#
#   rank  layer        folder
#   0     platform     src/platform/    (what octo asks the OS; includes only core/err.h of octo's)
#   0     core         src/core/        (its kernels/ too; may include platform/)
#   1     model        src/model/
#   2     kv           src/kv/          (from model: only model/kv_iface.h)
#   2     moe          src/moe/         (from model: only model/experts_iface.h)
#   2     speculative  src/speculative/ (from model: the sampler and tokenizer only)
#   3     train        src/train/      (on-device training: the backward pass; a peer of runtime)
#   3     runtime      src/runtime/
#   4     api          src/octo.c (src/octo_*.c: its parts), include/octo.h
#   4     convert      src/convert/     (model conversions: upcycle; the api does not use them)
#   5     tools        tools/ (may include internals: each such line says why)
#
# The three layers of rank 2 are peers that must not know each other: the KV
# cache does not know which experts are resident, the expert cache does not
# know the KV cache, and speculation reaches the model it drafts with only
# through speculative/proposer.h's narrow interface.
cd "$(dirname "$0")/.." || exit 2

layer_of() { # path (a file, or an include's target) -> layer name
    case "$1" in
    src/platform/* | platform/*) echo platform ;;
    src/core/* | core/*) echo core ;;
    src/model/* | model/*) echo model ;;
    src/kv/* | kv/*) echo kv ;;
    src/moe/* | moe/*) echo moe ;;
    src/speculative/* | speculative/*) echo speculative ;;
    src/runtime/* | runtime/*) echo runtime ;;
    src/train/* | train/*) echo train ;;
    src/convert/* | convert/*) echo convert ;;
    src/octo.c | src/octo_*.c | src/octo_*.h | octo_*.h | octo.h | include/octo.h) echo api ;;
    tools/*) echo tools ;;
    *) echo unknown ;;
    esac
}

rank_of() {
    case "$1" in
    platform | core) echo 0 ;; model) echo 1 ;; kv | moe | speculative) echo 2 ;;
    runtime | train) echo 3 ;; api | convert) echo 4 ;; tools) echo 5 ;; *) echo 9 ;;
    esac
}

# "ok" or why the include of target (a path from src/) by a file of layer is wrong
judge() { # from_layer to_layer target
    from=$1 to=$2 target=$3
    [ "$to" = unknown ] && { echo "includes $target, which is in no layer"; return; }
    [ "$from" = "$to" ] && { echo ok; return; }
    case "$from:$target" in
    platform:core/err.h | core:platform/*) echo ok; return ;;
    platform:*) echo "platform may include only core/err.h of octo's, not $target"; return ;;
    esac
    if [ "$(rank_of "$to")" -ge "$(rank_of "$from")" ]; then
        echo "$from includes $target from $to, a layer at or above its own"; return
    fi
    case "$from:$target" in
    kv:model/kv_iface.h | moe:model/experts_iface.h) echo ok ;;
    kv:model/* | moe:model/*) echo "$from may know the model only through its interface header, not $target" ;;
    speculative:model/sampler.h | speculative:model/tokenizer.h) echo ok ;;
    speculative:model/*) echo "speculative may use the model's sampler and tokenizer only, not $target" ;;
    *) echo ok ;;
    esac
}

out=$(mktemp) || exit 2
bad=0
for f in $(find src tools -name '*.[ch]' | sort); do
    from=$(layer_of "$f")
    dir=$(dirname "$f")
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | while IFS= read -r line; do
        n=${line%%:*}
        inc=$(printf '%s\n' "$line" | sed 's/^[^"]*"\([^"]*\)".*/\1/')
        # a bare name is a file beside the includer; else a path from src/ (or octo.h)
        if [ -f "$dir/$inc" ] && [ "${inc#*/}" = "$inc" ]; then target=${dir#src/}/$inc; else target=$inc; fi
        case "$f" in tools/*) [ -f "tools/$inc" ] && continue ;; esac
        # the build's generated files of a tool (CMakeLists.txt: the chat page's bytes, from tools/serve_page.html)
        case "$f:$inc" in tools/*:generated/*) [ -f "tools/$(basename "$inc" _data.h).html" ] && continue ;; esac
        verdict=$(judge "$from" "$(layer_of "$target")" "$target")
        [ "$verdict" = ok ] || echo "$f:$n: $verdict"
    done
done >"$out" 2>&1 || true
if [ -s "$out" ]; then
    cat "$out"
    echo "check-layers: $(wc -l <"$out") include(s) break the layering (docs/architecture.md)"
    bad=1
else
    echo "check-layers: every include in src/ and tools/ goes to its own layer or below"
fi

# Only the platform room (src/platform/) asks the operating system: no /proc
# or /sys path in any other C file of octo's (src/, tools/, the tests, fuzz/,
# examples/), not even in a comment, so that a port touches that room alone.
# Three files are let through: tests/test_platform.c and tests/test_memwatch.c
# feed the platform's parsers text that names such paths (a mounts line, a
# fake tree's paths) and read none of them; tests/memwatch_real.c, a report
# run by hand, reads its own threads' CPU time to measure the watcher's. The
# shell and Python tests (tests/cli.sh, tests/serve/attack.py) and bench/*.py
# watch the process from outside and are not checked.
find src tools tests fuzz examples include -name '*.[ch]' | sort | while IFS= read -r f; do
    case "$f" in src/platform/* | tests/test_platform.c | tests/test_memwatch.c | tests/memwatch_real.c) continue ;; esac
    grep -nE '/(proc|sys)([^A-Za-z0-9_]|$)' "$f" | sed "s|^|$f:|"
done >"$out"
if [ -s "$out" ]; then
    cat "$out"
    echo "check-layers: $(wc -l <"$out") line(s) name /proc or /sys outside the platform room (src/platform/)"
    bad=1
else
    echo "check-layers: no C file outside src/platform/ names /proc or /sys"
fi
# The bindings and the examples are programs of the public API, as an app is: a C file of
# bindings/ or examples/ includes no header of octo's but octo.h (python/ is ctypes: no C).
find bindings examples -name '*.[ch]' | sort | while IFS= read -r f; do
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | grep -v '"octo.h"' | sed "s|^|$f:|"
done >"$out"
if [ -s "$out" ]; then
    cat "$out"
    echo "check-layers: $(wc -l <"$out") include(s) in bindings/ or examples/ reach past include/octo.h"
    bad=1
else
    echo "check-layers: bindings/ and examples/ include only octo.h of octo's"
fi
rm -f "$out"
exit $bad
