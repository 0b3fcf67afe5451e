#!/bin/sh
# test-arm.sh — cross-build octo for AArch64 and run the kernel and golden-logit
# tests under qemu-user, on every ARM kernel variant:
#
#   QEMU_CPU=max         has the dot-product extension: the NEON path uses SDOT
#                        (test_kernels then also checks the plain NEON kernels)
#   QEMU_CPU=cortex-a76  ARMv8.2 with the dot product (SDOT) and without i8mm: the
#                        packed kernels on SDOT, as on most phones since 2019 (max adds
#                        i8mm: SMMLA for Q4_0 and Q8_0 batches, and BF16: BFMMLA for
#                        F16 and BF16 prefill)
#   QEMU_CPU=cortex-a53  ARMv8.0, no dot product: the NEON path uses SMULL/SADALP;
#                        qemu raises SIGILL on an SDOT, so this proves the plain
#                        variant never executes one
#   OCTO_CPU=scalar      the portable reference kernels, compiled for AArch64
#
# Tests go through ctest, which runs each binary under the emulator named in
# cmake/aarch64-linux-gnu.cmake. Before each set the script checks (with
# `octo inspect`) that the path asked for is the one running, since OCTO_CPU
# falls back silently. Needs the Debian packages gcc-aarch64-linux-gnu and
# qemu-user, and ../shared for the golden test (skipped without it). Takes a
# few minutes on two cores; exits non-zero on any failure.
set -eu
cd "$(dirname "$0")/.."
start=$(date +%s)

for tool in aarch64-linux-gnu-gcc qemu-aarch64; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "test-arm: $tool not found (apt-get install gcc-aarch64-linux-gnu qemu-user)" >&2
        exit 1
    fi
done

B=build-arm
# emulated code runs ~15x slower: the slow tests cover fewer prompts (tests/util.h)
export OCTO_TEST_QUICK=1 OCTO_TEST_EMULATED=1
QEMU="qemu-aarch64 -L /usr/aarch64-linux-gnu"
echo "== configure and build ($B)"
cmake -S . -B "$B" -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release -DOCTO_TEST_TIMEOUT=2400 >/dev/null
cmake --build "$B" -j 2 --target octo test_kernels test_matmul test_quant test_golden test_forward_ref test_attn test_kv test_spec test_archs test_deploy test_packed
mkdir -p "$B/testtmp"
probe="$B/testtmp/probe.gguf"
$QEMU "$B/octo" synth -o "$probe" >/dev/null

failed=""

# run QEMU_CPU OCTO_CPU INT8_DOT(yes|no) TESTS: the tests (a ctest regex) on that CPU and path
run() {
    qcpu=$1 path=$2 int8dot=$3 tests=$4
    label="QEMU_CPU=$qcpu OCTO_CPU=$path"
    echo "== $label: $tests"
    got=$(QEMU_CPU=$qcpu OCTO_CPU=$path $QEMU "$B/octo" inspect -m "$probe" 2>/dev/null |
          sed -n 's/^compute: *\([a-z0-9]*\) kernels.*/\1/p')
    if [ "$got" != "$path" ]; then
        echo "test-arm: $label runs '$got' kernels, not $path" >&2
        failed="$failed [$label: path]"
        return 0
    fi
    ok=1
    QEMU_CPU=$qcpu OCTO_CPU=$path ctest --test-dir "$B" --output-on-failure --no-tests=error -R "$tests" || ok=0
    # each test's own count of checks, from ctest's log
    awk -v label="$label" '/^[0-9]+\/[0-9]+ Testing: / { name = $3 }
        /^[0-9]+ passed, [0-9]+ failed/ { printf "   %-40s %-17s %s\n", label, name, $0 }
        /^skipped: / { printf "   %-40s %-17s %s\n", label, name, $0 }' "$B/Testing/Temporary/LastTest.log"
    if [ "$ok" = 0 ]; then
        failed="$failed [$label]"
        return 0
    fi
    # test_kernels lists the paths it compared; a "-noint8dot" variant exists
    # only when the CPU reports the dot-product extension.
    case $tests in *test_kernels*)
        paths=$(grep -m1 '^paths:' "$B/Testing/Temporary/LastTest.log" || true)
        echo "$paths"
        has=no
        case $paths in *noint8dot*) has=yes ;; esac
        if [ "$has" != "$int8dot" ]; then
            echo "test-arm: $label: dot-product extension is '$has', expected '$int8dot'" >&2
            failed="$failed [$label: int8 dot]"
        fi
        ;;
    esac
}

# (test_kv's policies are the same C on every path; their NEON part, attention, is test_attn's: it
# ran here at 159 s of qemu's time and is left to the native runs)
run max neon yes '^(test_kernels|test_matmul|test_quant|test_golden|test_forward_ref|test_attn|test_spec|test_archs|test_deploy|test_packed)$'
# -cpu max has BF16: F16 and BF16 prefill batches must have run on BFMMLA (test_matmul says which kernel)
grep -q '^bf16 prefill kernel: neon-bfmmla' "$B/Testing/Temporary/LastTest.log" ||
    { echo "test-arm: QEMU_CPU=max: the BFMMLA prefill kernel did not run" >&2; failed="$failed [max: bfmmla]"; }
run cortex-a76 neon yes '^(test_kernels|test_packed)$'
run cortex-a53 neon no '^(test_kernels|test_matmul|test_golden|test_forward_ref|test_packed|test_attn)$'
run max scalar yes '^(test_kernels|test_matmul|test_golden|test_forward_ref)$'

echo "== test-arm: $(($(date +%s) - start)) s"
if [ -n "$failed" ]; then
    echo "test-arm: FAILED:$failed" >&2
    exit 1
fi
echo "test-arm: all passed"
