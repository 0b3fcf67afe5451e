#!/bin/sh
# run.sh BUILD_DIR SECONDS [TARGET...] — fuzz each target (default: gguf
# model tokenizer parsers serve lora fedavg) for SECONDS (serve, the server's request
# reader, lora, an adapter bound to a fixed base, and fedavg, a federated update
# averaged with a good one: small surfaces, for half of it). Before fuzzing, every input kept in
# fuzz/regressions/TARGET/ is replayed (a crash once found stays a test);
# the corpus is fuzz/corpus/TARGET/ (kept in the repo) plus, for the model
# readers, valid synthetic models of every tensor type made here. A crash
# is saved to fuzz/regressions/TARGET/ (commit it with its fix) and fails
# the run, as does any leak or sanitizer report.
set -e
build=$1
secs=${2:-60}
shift 2 || shift $#
targets=${*:-gguf model tokenizer parsers serve lora fedavg}
here=$(cd "$(dirname "$0")" && pwd)
seeds=$build/fuzz-seeds
mkdir -p "$seeds"
i=0
for t in f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1; do
    i=$((i + 1))
    "$build/octo" synth -o "$seeds/seed-$t.gguf" --type "$t" --vocab 259 --embd 32 --layers 1 --heads 2 --kv-heads 1 --ff 32 --ctx 16 --tied --seed $i
done
"$build/octo" synth -o "$seeds/seed-moe.gguf" --type q8_0 --vocab 259 --embd 32 --layers 1 --heads 2 --kv-heads 1 --ff 32 --experts 4 --experts-used 2
"$build/octo" synth -o "$seeds/seed-qwen2.gguf" --arch qwen2 --vocab 259 --embd 32 --layers 1 --heads 2 --kv-heads 2 --ff 32 --gguf-version 2
"$build/octo" synth -o "$seeds/seed-k.gguf" --type q4_k --vocab 259 --embd 256 --layers 1 --heads 2 --kv-heads 1 --ff 256 --tied
# one of each other architecture (docs/architectures.md), so mutants reach their binding and features
for a in qwen2moe olmoe granitemoe phi3 gemma2 deepseek2; do
    ex="" l=1 # under the fuzzer's 128 KiB inputs; deepseek2 needs a dense and an MoE layer
    case $a in qwen2moe | olmoe | granitemoe | deepseek2) ex="--experts 4 --experts-used 2" ;; esac
    [ $a = deepseek2 ] && l=2
    "$build/octo" synth -o "$seeds/seed-$a.gguf" --arch $a --vocab 259 --embd 64 --layers $l --heads 2 --kv-heads 1 \
        --ff 32 --ctx 16 --window 4 --type q8_0 --tied $ex
done
# adapters for the base fuzz_lora binds them to (synth's defaults with 4 experts, 2 used): every type, ranks 1..32
"$build/octo" synth -o "$seeds/lora-base.gguf" --experts 4 --experts-used 2
mkdir -p "$seeds/lora"
i=0
for spec in "f32 1" "f16 4" "bf16 8" "q8_0 32"; do
    i=$((i + 1))
    set -- $spec
    "$build/octo" synth --lora-for "$seeds/lora-base.gguf" --type "$1" --rank "$2" --seed $i -o "$seeds/lora/seed-$1.gguf"
done
failed=""
for t in $targets; do
    fuzzer=$build/fuzz_$t
    kept=$here/regressions/$t
    corpus=$build/fuzz-corpus-$t
    mkdir -p "$kept" "$corpus"
    extra=""
    case $t in gguf | model) extra=$seeds ;; lora) extra=$seeds/lora ;; esac
    rc=0
    if [ -n "$(ls -A "$kept")" ]; then
        "$fuzzer" -runs=0 "$kept"/* >"$build/fuzz-$t-replay.log" 2>&1 || rc=$?
        [ "$rc" -eq 0 ] && echo "fuzz_$t: $(ls "$kept" | wc -l) kept regression inputs replayed, no crash" ||
            { tail -n 20 "$build/fuzz-$t-replay.log"; failed="$failed $t(replay)"; }
    fi
    rc=0
    t_secs=$secs
    [ "$t" = serve ] || [ "$t" = lora ] || [ "$t" = fedavg ] && t_secs=$(((secs + 1) / 2))
    "$fuzzer" -max_total_time="$t_secs" -max_len=131072 -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$kept/" "$corpus" "$here/corpus/$t" $extra >"$build/fuzz-$t.log" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ]; then
        tail -n 30 "$build/fuzz-$t.log"
        echo "fuzz_$t failed (exit $rc); the input is kept in fuzz/regressions/$t/"
        failed="$failed $t"
    else
        echo "fuzz_$t: no crash in $t_secs s ($(sed -n 's/^stat::number_of_executed_units: *//p' "$build/fuzz-$t.log") inputs)"
    fi
done
[ -z "$failed" ] || { echo "fuzzing failed:$failed"; exit 1; }
