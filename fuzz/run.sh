#!/bin/sh
# run.sh BUILD_DIR SECONDS — make a seed corpus of valid synthetic models
# (every tensor type, dense and MoE, GGUF v2 and v3) and fuzz the reader.
# Exits non-zero on any crash, leak or sanitizer report.
set -e
build=$1
secs=${2:-60}
corpus=$build/fuzz-corpus
mkdir -p "$corpus" "$build/fuzz-crashes"
i=0
for t in f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1; do
    i=$((i + 1))
    "$build/octo" synth -o "$corpus/seed-$t.gguf" --type "$t" --vocab 259 --embd 32 --layers 1 --heads 2 --kv-heads 1 --ff 32 --ctx 16 --tied --seed $i
done
"$build/octo" synth -o "$corpus/seed-moe.gguf" --type q8_0 --vocab 259 --embd 32 --layers 1 --heads 2 --kv-heads 1 --ff 32 --experts 4 --experts-used 2
"$build/octo" synth -o "$corpus/seed-qwen2.gguf" --arch qwen2 --vocab 259 --embd 32 --layers 1 --heads 2 --kv-heads 2 --ff 32 --gguf-version 2
"$build/octo" synth -o "$corpus/seed-k.gguf" --type q4_k --vocab 259 --embd 256 --layers 1 --heads 2 --kv-heads 1 --ff 256 --tied
rc=0
"$build/fuzz_gguf" -max_total_time="$secs" -max_len=131072 -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$build/fuzz-crashes/" "$corpus" >"$build/fuzz.log" 2>&1 || rc=$?
tail -n 12 "$build/fuzz.log"
if [ "$rc" -ne 0 ]; then
    echo "fuzz_gguf failed (exit $rc); inputs in $build/fuzz-crashes/"
    exit 1
fi
echo "fuzz: no crash in $secs s"
