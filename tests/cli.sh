#!/bin/sh
# cli.sh — the octo command line as a user meets it: exit codes, one-line
# errors, and the figures `inspect` and `logits` print.
# usage: cli.sh OCTO_BINARY SCRATCH_DIR [SHARED_DIR]
octo=$1
tmp=$2/cli-$$
shared=$3
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }

# expect CODE LINES CMD...: exit code and number of stderr lines
expect() {
    want_rc=$1; want_lines=$2; shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" -eq "$want_rc" ] && [ "$lines" -eq "$want_lines" ]; then ok
    else bad "$* -> exit $rc, $lines stderr lines (want $want_rc, $want_lines): $(cat "$tmp/err")"; fi
}

"$octo" >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "no arguments must exit 2"
expect 0 0 "$octo" help
expect 2 1 "$octo" frobnicate
expect 2 1 "$octo" inspect
expect 1 1 "$octo" inspect -m /nonexistent/model.gguf
grep -q "no such file" "$tmp/err" && ok || bad "missing file message: $(cat "$tmp/err")"
expect 1 1 "$octo" inspect -m "$tmp"
grep -q "is a directory" "$tmp/err" && ok || bad "directory message"
: >"$tmp/empty.gguf"
expect 1 1 "$octo" inspect -m "$tmp/empty.gguf"
grep -q "empty" "$tmp/err" && ok || bad "empty message"
printf 'NOTAGGUF-file-with-some-bytes' >"$tmp/junk.gguf"
expect 1 1 "$octo" inspect -m "$tmp/junk.gguf"
grep -q "magic" "$tmp/err" && ok || bad "magic message"

# a synthetic model: shape and parameter count as inspect reports them
expect 0 0 "$octo" synth -o "$tmp/m.gguf" --type q8_0 --vocab 300 --embd 64 --layers 2 --heads 4 --kv-heads 2 --ff 96 --seed 3
expect 2 1 "$octo" synth -o "$tmp/x.gguf" --type q9_9
expect 2 1 "$octo" synth -o "$tmp/x.gguf" --layers zero
expect 1 1 "$octo" synth -o "$tmp/x.gguf" --type q4_k --embd 64
expect 0 0 "$octo" inspect -m "$tmp/m.gguf" --kv-tokens 100
# params: 2*300*64 (embedding, output) + 64 + 2 * (2*64 + 64*64*2 + 64*32*2 + 3*64*96) = 100160
grep -q "^parameters: *100160 " "$tmp/out" && ok || bad "parameter count: $(grep parameters "$tmp/out")"
grep -q "^architecture: *llama$" "$tmp/out" && ok || bad "architecture line"
grep -q "^tensors: *21 (F32=5 Q8_0=16)$" "$tmp/out" && ok || bad "tensor line: $(grep tensors "$tmp/out")"
# kv: 100 tokens * 2 layers * 2 kv heads * (16 + 16 dims of K and V) * 4 bytes = 51200
grep -q "^kv cache: *51200 bytes" "$tmp/out" && ok || bad "kv line: $(grep 'kv cache' "$tmp/out")"
grep -q "^resident:" "$tmp/out" && ok || bad "resident line"
# the kernels line: the path, and which kernel reads each packed type (none on the scalar path); types
# read by one kernel share a group ("packed q4_0 q8_0: avx2-vnni-prefetch; packed q4_K: avx2-prefetch"
# where the CPU has AVX-VNNI), so each type is looked for in some group
path=$(sed -n 's/^compute: *\([a-z0-9]*\) kernels.*/\1/p' "$tmp/out")
line=$(grep '^kernels' "$tmp/out")
kernels_ok() { # LINE PATH
    case $2 in
    scalar) echo "$1" | grep -q "^kernels: *scalar; GGUF layout$" ;;
    *) echo "$1" | grep -q "^kernels: *$2; packed " || return 1
        for t in q4_0 q8_0 q4_K; do echo "$1" | grep -Eq "packed ([a-zA-Z0-9_]+ )*$t[ :]" || return 1; done ;;
    esac
}
kernels_ok "$line" "$path" && ok || bad "kernels line: $line (path $path)"
kernels_ok "kernels: avx2; packed q4_0 q8_0: x" avx2 && bad "kernels_ok took a line without q4_K" || ok
OCTO_CPU=scalar "$octo" inspect -m "$tmp/m.gguf" 2>/dev/null | grep -qx "kernels: *scalar; GGUF layout" && ok ||
    bad "kernels line on the scalar path"

# logits: n_tokens x n_vocab float32
expect 0 0 "$octo" logits -m "$tmp/m.gguf" --tokens "1 2 3 299" --out "$tmp/l.f32"
[ "$(wc -c <"$tmp/l.f32")" -eq $((4 * 300 * 4)) ] && ok || bad "logits file size $(wc -c <"$tmp/l.f32")"
expect 1 1 "$octo" logits -m "$tmp/m.gguf" --tokens "1 300" --out "$tmp/l.f32"
grep -q "outside the vocabulary" "$tmp/err" && ok || bad "token range message"
expect 2 1 "$octo" logits -m "$tmp/m.gguf" --tokens "1 x" --out "$tmp/l.f32"
expect 2 1 "$octo" logits -m "$tmp/m.gguf" --tokens "" --out "$tmp/l.f32"
expect 1 1 "$octo" logits -m "$tmp/m.gguf" --tokens "1 2 3" --ctx 2 --out "$tmp/l.f32"
expect 1 1 "$octo" logits -m "$tmp/m.gguf" --tokens "1 2" --out /nonexistent/dir/l.f32
# same seed, same file; another seed, another file
"$octo" synth -o "$tmp/m2.gguf" --type q8_0 --vocab 300 --embd 64 --layers 2 --heads 4 --kv-heads 2 --ff 96 --seed 3
cmp -s "$tmp/m.gguf" "$tmp/m2.gguf" && ok || bad "synth is not deterministic"
"$octo" synth -o "$tmp/m3.gguf" --type q8_0 --vocab 300 --embd 64 --layers 2 --heads 4 --kv-heads 2 --ff 96 --seed 4
cmp -s "$tmp/m.gguf" "$tmp/m3.gguf" && bad "seed is ignored" || ok

# text in, text out on a synthetic model
# octo upcycle: usage errors exit 2, bad input 1, each one line; a good run
# writes an MoE model that loads, runs, says where it came from, and is not
# upcycled twice
expect 2 1 "$octo" upcycle -m "$tmp/m.gguf" -o "$tmp/u.gguf"
expect 2 1 "$octo" upcycle -m "$tmp/m.gguf" -o "$tmp/u.gguf" --experts 4
expect 2 1 "$octo" upcycle -m "$tmp/m.gguf" -o "$tmp/u.gguf" --experts 4 --experts-used 2 --split kmeans
expect 2 1 "$octo" upcycle -m "$tmp/m.gguf" -o "$tmp/u.gguf" --experts 4 --experts-used 2 --shared -1
expect 1 1 "$octo" upcycle -m "$tmp/m.gguf" -o "$tmp/u.gguf" --experts 4 --experts-used 5
expect 1 1 "$octo" upcycle -m "$tmp/m.gguf" -o "$tmp/u.gguf" --experts 97 --experts-used 2
expect 1 1 "$octo" upcycle -m "$tmp/m.gguf" -o "$tmp/u.gguf" --experts 4 --experts-used 2
grep -q "the cluster split learns from a calibration text and none was given.*(-f TEXT gives one" "$tmp/err" && ok || bad "upcycle without a text: $(cat "$tmp/err")"
printf 'too short' >"$tmp/short.txt"
expect 1 1 "$octo" upcycle -m "$tmp/m.gguf" -o "$tmp/u.gguf" --experts 4 --experts-used 2 -f "$tmp/short.txt"
grep -q "too short" "$tmp/err" && ok || bad "upcycle with a short text: $(cat "$tmp/err")"
[ ! -e "$tmp/u.gguf" ] && ok || bad "a failed upcycle left an output file"
expect 0 1 "$octo" upcycle -m "$tmp/m.gguf" -o "$tmp/u.gguf" --experts 4 --experts-used 2 --split random --router uniform
grep -q "4 experts of 24 neurons (0 zero), 2 used per token" "$tmp/out" && ok || bad "upcycle report: $(cat "$tmp/out")"
grep -q "quality:    not measured" "$tmp/out" && ok || bad "upcycle without text must say quality was not measured"
expect 0 0 "$octo" inspect -m "$tmp/u.gguf"
grep -q "experts:        4, 2 used per token" "$tmp/out" && ok || bad "inspect of an upcycled model: $(cat "$tmp/out")"
grep -q "origin:         upcycled from octo synthetic by octo: 4 experts, 2 used, split random, router uniform" "$tmp/out" \
    && ok || bad "inspect shows no origin: $(cat "$tmp/out")"
expect 0 0 "$octo" run -m "$tmp/u.gguf" -p "ab" -n 4 --temp 0
# the expert cache's options: the same text with the smallest cache, a trace of every token and layer
"$octo" run -m "$tmp/u.gguf" -p "ab" -n 6 --temp 0 >"$tmp/all.txt" 2>/dev/null
expect 0 0 "$octo" run -m "$tmp/u.gguf" -p "ab" -n 6 --temp 0 --moe-cache 1 --moe-policy lru --moe-prefetch off \
    --moe-trace "$tmp/trace.txt"
cmp -s "$tmp/out" "$tmp/all.txt" && ok || bad "the smallest expert cache changed the text: $(cat "$tmp/out")"
[ "$(grep -c '^[0-9]* [0-9]* \(HIT\|MISS\) \(HIT\|MISS\) [0-3] [0-3]$' "$tmp/trace.txt")" -eq "$(grep -vc '^#' "$tmp/trace.txt")" ] \
    && [ "$(grep -vc '^#' "$tmp/trace.txt")" -ge 10 ] && ok || bad "trace lines: $(head -5 "$tmp/trace.txt")"
expect 0 0 "$octo" inspect -m "$tmp/u.gguf" --moe-cache 50%
grep -q "^expert cache:   .*expert cache given" "$tmp/out" && ok || bad "inspect's expert cache: $(cat "$tmp/out")"
expect 2 1 "$octo" run -m "$tmp/u.gguf" -p "ab" --moe-prefetch sometimes
expect 2 1 "$octo" run -m "$tmp/u.gguf" -p "ab" --moe-cache 0%
expect 2 1 "$octo" run -m "$tmp/u.gguf" -p "ab" --moe-policy mru
expect 1 1 "$octo" run -m "$tmp/u.gguf" -p "ab" --moe-trace /nonexistent/dir/t.txt
# the 2-bit copies: moe-prep's errors, a sidecar that --moe-int2 on uses (INT2 in the trace), off exact
expect 2 1 "$octo" run -m "$tmp/u.gguf" -p "ab" --moe-int2 maybe
expect 2 1 "$octo" moe-prep -f "$tmp/short.txt"
expect 1 1 "$octo" moe-prep -m "$tmp/m.gguf"
grep -q "has no experts" "$tmp/err" && ok || bad "moe-prep of a dense model: $(cat "$tmp/err")"
expect 1 1 "$octo" moe-prep -m "$tmp/u.gguf"
grep -q "not whole blocks of 32" "$tmp/err" && ok || bad "moe-prep of 24-neuron experts: $(cat "$tmp/err")"
"$octo" synth -o "$tmp/x.gguf" --type q8_0 --vocab 300 --embd 64 --layers 2 --heads 4 --kv-heads 2 --ff 64 \
    --experts 4 --experts-used 2 --seed 5
expect 0 0 "$octo" moe-prep -m "$tmp/x.gguf"
grep -q "^wrote .*x.gguf.int2: .*(29 % of the experts'" "$tmp/out" && grep -q "^cost not measured" "$tmp/out" \
    && ok || bad "moe-prep: $(cat "$tmp/out")"
"$octo" run -m "$tmp/x.gguf" -p "ab" -n 6 --temp 0 >"$tmp/all.txt" 2>/dev/null
expect 0 0 "$octo" run -m "$tmp/x.gguf" -p "ab" -n 6 --temp 0 --moe-cache 1 --moe-int2 off
cmp -s "$tmp/out" "$tmp/all.txt" && ok || bad "--moe-int2 off changed the text"
expect 0 0 "$octo" run -m "$tmp/x.gguf" -p "ab" -n 6 --temp 0 --moe-cache 1 --moe-int2 on --moe-prefetch off \
    --moe-trace "$tmp/trace.txt"
grep -q " INT2 " "$tmp/trace.txt" && ok || bad "no INT2 in the trace: $(head -5 "$tmp/trace.txt")"
expect 0 0 "$octo" inspect -m "$tmp/x.gguf" --moe-cache 1
grep -q "^2-bit copies:   off: the sidecar's cost was never measured" "$tmp/out" && ok || bad "inspect: $(cat "$tmp/out")"
expect 1 1 "$octo" upcycle -m "$tmp/u.gguf" -o "$tmp/u2.gguf" --experts 2 --experts-used 1 --split random --router uniform
grep -q "already a Mixture-of-Experts" "$tmp/err" && ok || bad "upcycling an MoE model: $(cat "$tmp/err")"

expect 0 0 "$octo" run -m "$tmp/m.gguf" -p "ab" -n 5 --seed 1
expect 0 0 "$octo" run -m "$tmp/m.gguf" -p "ab" -n 6 --ids --temp 0
[ "$(wc -w <"$tmp/out")" -eq 6 ] && ok || bad "--ids printed $(wc -w <"$tmp/out") ids, want 6"
# greedy: a sampled run may end at the end-of-text token after one token, and the latency line needs two (CI60 failed on that)
"$octo" run -m "$tmp/m.gguf" -p "ab" -n 3 --temp 0 --stats 2>&1 >/dev/null | grep -q "^generation .*tokens/s" && ok || bad "--stats table"
"$octo" run -m "$tmp/m.gguf" -p "ab" -n 3 --temp 0 --stats 2>&1 >/dev/null | grep -q "^pressure     level none, 0 trims, 0 regrows; weights " && ok || bad "--stats table: the pressure line"
"$octo" run -m "$tmp/m.gguf" -p "ab" -n 3 --temp 0 --stats 2>&1 >/dev/null | grep -q "^cpu          [0-9]* of [0-9]* threads: .*; 0 changes while running, 0 probes, idle workers spin [0-9]* rounds, [0-9]* tokens paced$" && ok || bad "--stats table: the cpu line"
"$octo" run -m "$tmp/m.gguf" -p "ab" -n 3 --temp 0 --stats 2>&1 >/dev/null | grep -Eq "^latency      p50 [0-9.]+ ms, p90 [0-9.]+, p95 [0-9.]+, p99 [0-9.]+, max [0-9.]+; spread -?[0-9.]+ \(sd/mean\) over [0-9]+ tokens$" &&
    ok || bad "--stats table: the latency line"
"$octo" run -m "$tmp/m.gguf" -p "ab" -n 1 --stats 2>&1 >/dev/null | grep -q "^latency      unknown (fewer than 2 tokens)$" && ok || bad "--stats table: latency of one token"
expect 1 1 "$octo" run -m "$tmp/m.gguf" -p "" -n 3
grep -q "empty" "$tmp/err" && ok || bad "empty prompt message"
# llama.cpp's habits: --temp -1 is greedy (the same ids as --temp 0); -n 0 reads the prompt only
"$octo" run -m "$tmp/m.gguf" -p "ab" -n 6 --temp -1 --ids >"$tmp/t1" 2>/dev/null &&
    "$octo" run -m "$tmp/m.gguf" -p "ab" -n 6 --temp 0 --ids >"$tmp/t0" 2>/dev/null && cmp -s "$tmp/t0" "$tmp/t1" &&
    [ "$(wc -w <"$tmp/t0")" -eq 6 ] && ok || bad "--temp -1 is not greedy: $(cat "$tmp/t1") / $(cat "$tmp/t0")"
expect 1 1 "$octo" run -m "$tmp/m.gguf" -p "ab" --top-p 1.5
expect 0 0 "$octo" run -m "$tmp/m.gguf" -p "ab" -n 0 --ids
[ -z "$(tr -d ' \n' <"$tmp/out")" ] && ok || bad "-n 0 generated: $(cat "$tmp/out")"
"$octo" run -m "$tmp/m.gguf" -p "ab" -n 0 --stats --json 2>&1 >/dev/null | tail -1 |
    python3 -c 'import json,sys; s=json.load(sys.stdin); assert s["prompt_tokens"] > 0 and s["decode_tokens"] == 0, s' &&
    ok || bad "-n 0's stats"
expect 2 1 "$octo" run -m "$tmp/m.gguf" -p "ab" -n -2
expect 1 1 "$octo" run -m "$tmp/m.gguf" -p "a long prompt for a tiny context" --ctx 4
grep -q "context" "$tmp/err" && ok || bad "context message"
# a generation that never started has no stats table: the error line only
expect 1 1 "$octo" run -m "$tmp/m.gguf" -p "a long prompt for a tiny context" --ctx 4 --stats
expect 2 1 "$octo" run -m "$tmp/m.gguf"
# lookahead decoding: the same greedy ids as plain decoding; bad W,N,G are one clear line
"$octo" run -m "$tmp/m.gguf" -p "ab ab ab" -n 40 --ids --temp 0 --spec none >"$tmp/plain" 2>/dev/null
expect 0 0 "$octo" run -m "$tmp/m.gguf" -p "ab ab ab" -n 40 --ids --temp 0 --spec lookahead --lookahead 4,3,2
cmp -s "$tmp/out" "$tmp/plain" && ok || bad "--spec lookahead changed the greedy ids"
expect 2 1 "$octo" run -m "$tmp/m.gguf" -p "ab" --lookahead 4,3
expect 1 1 "$octo" run -m "$tmp/m.gguf" -p "ab" --spec lookahead --lookahead 16,6,4
grep -q "63 at most" "$tmp/err" && ok || bad "lookahead size message: $(cat "$tmp/err")"
expect 2 1 "$octo" run -m "$tmp/m.gguf" -p "ab" --spec sideways
grep -q "one of auto, none, ngram, draft, self, lookahead (see" "$tmp/err" && ok || bad "--spec sideways: $(cat "$tmp/err")"
# prompt compression: a ratio outside (0, 1] is a usage error, no draft a one-line error; with a
# draft (the model itself) --stats says how many prompt tokens were dropped
expect 2 1 "$octo" run -m "$tmp/m.gguf" -p "ab" --prompt-compress 0
expect 2 1 "$octo" run -m "$tmp/m.gguf" -p "ab" --prompt-compress 1.5
expect 1 1 "$octo" run -m "$tmp/m.gguf" -p "ab ab ab" --prompt-compress 0.5
grep -q "needs a draft model" "$tmp/err" && ok || bad "--prompt-compress without a draft: $(cat "$tmp/err")"
long="$(printf 'ab cd ef gh %.0s' $(seq 1 30))"
expect 0 2 "$octo" run -m "$tmp/m.gguf" -p "$long" -n 4 --draft "$tmp/m.gguf" --prompt-compress 0.5 --stats --json --temp 0 --spec none
grep -q '"prompt_tokens_dropped": [1-9]' "$tmp/err" && ok || bad "--prompt-compress stats: $(cat "$tmp/err")"
# bench --spec: the comparison as JSON; --spec none and a stray --prompt are usage errors
expect 0 0 "$octo" bench -m "$tmp/m.gguf" --spec ngram --prompt "ab ab ab ab" -n 24 -r 1 --json
grep -q '"speedup": {"median": ' "$tmp/out" && grep -q '"spec": "ngram"' "$tmp/out" && ok || bad "bench --spec json: $(cat "$tmp/out")"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert set(d["spec_latency_last"]) == {"p50_ms", "p90_ms", "p95_ms", "p99_ms", "max_ms", "cv"}
assert 0 <= d["plain_latency_last"]["p50_ms"] <= d["plain_latency_last"]["p99_ms"]' "$tmp/out" && ok || bad "bench --spec json's latency: $(cat "$tmp/out")"
expect 2 1 "$octo" bench -m "$tmp/m.gguf" --spec none
expect 2 1 "$octo" bench -m "$tmp/m.gguf" --prompt "ab"
printf 'hello\nhow are you\n' | "$octo" run -m "$tmp/m.gguf" --chat -n 4 --seed 2 >"$tmp/out" 2>"$tmp/err"
[ $? -eq 0 ] && [ "$(wc -l <"$tmp/out")" -eq 2 ] && ok || bad "--chat: $(cat "$tmp/err")"

# ---- reliability (issue 17): what a full disk, a strange path and a careless flag did
# every command's output goes to stdout: a write error there is one line and exit 1, never 0
"$octo" synth -o "$tmp/big.gguf" --ctx 100000 --vocab 300 --embd 32 --layers 1 --heads 2 --kv-heads 1 --ff 32 --seed 5
printf 'Hi there\n' >"$tmp/t.txt"
for cmd in "run -m $tmp/m.gguf -p ab -n 4" "tokenize -m $tmp/m.gguf --text ab" "detokenize -m $tmp/m.gguf --ids 1,260" \
           "inspect -m $tmp/m.gguf" "eval -m $tmp/m.gguf -f $tmp/t.txt --ctx 8" "bench -m $tmp/m.gguf -p 8 -n 4 -r 1" "help"; do
    # shellcheck disable=SC2086
    $octo $cmd >/dev/full 2>"$tmp/err"; rc=$?
    [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "cannot write the output" "$tmp/err" && ok || bad "$cmd >/dev/full: exit $rc, $(cat "$tmp/err")"
done
# and each of them works (the sanitizer pass runs this script: every command once)
expect 0 0 "$octo" eval -m "$tmp/m.gguf" -f "$tmp/t.txt" --ctx 8
grep -q "^perplexity" "$tmp/out" && ok || bad "eval printed no perplexity: $(cat "$tmp/out")"
expect 0 0 "$octo" bench -m "$tmp/m.gguf" -p 8 -n 4 -r 1 --batch 1,2
grep -q "tokens/s" "$tmp/out" && ok || bad "bench printed no speed: $(cat "$tmp/out")"
grep -q "^latency     p50 [0-9.]* ms, .* over the 4 tokens of the repetitions$" "$tmp/out" && ok || bad "bench printed no latency: $(cat "$tmp/out")"
expect 0 0 "$octo" bench -m "$tmp/m.gguf" -p 8 -n 4 -r 2 --batch 1 --no-roofline --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["decode_latency_tokens"] == 8
assert 0 < d["decode_latency_p50_ms"] <= d["decode_latency_p90_ms"] <= d["decode_latency_p95_ms"] <= d["decode_latency_p99_ms"] <= d["decode_latency_max_ms"]' "$tmp/out" &&
    ok || bad "bench --json's latency: $(cat "$tmp/out")"
# synth -o never deletes what it did not create: a symlink, a FIFO, a directory are refused untouched
cp "$tmp/m.gguf" "$tmp/keep.gguf"
ln -s "$tmp/keep.gguf" "$tmp/link.gguf"
expect 1 1 "$octo" synth -o "$tmp/link.gguf" --seed 9
[ -L "$tmp/link.gguf" ] && cmp -s "$tmp/keep.gguf" "$tmp/m.gguf" && ok || bad "synth -o symlink changed something"
mkfifo "$tmp/fifo"
expect 1 1 "$octo" synth -o "$tmp/fifo" --seed 9
[ -p "$tmp/fifo" ] && ok || bad "synth -o FIFO removed it"
expect 1 1 "$octo" logits -m "$tmp/m.gguf" --tokens "1 2" --out "$tmp/fifo"
[ -p "$tmp/fifo" ] && ok || bad "logits --out FIFO removed it"
# a write that fails half-way (the file size limit stands in for a full disk) leaves the old model whole
sh -c "trap '' XFSZ; ulimit -f 16; exec \"$octo\" synth -o \"$tmp/keep.gguf\" --seed 9" >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] && cmp -s "$tmp/keep.gguf" "$tmp/m.gguf" && ok || bad "synth over a model, write failed: exit $rc, $(cat "$tmp/err")"
[ -z "$(ls -A "$tmp" | grep '^\.keep')" ] && ok || bad "synth left its temporary file: $(ls -A "$tmp")"
expect 0 0 "$octo" synth -o "$tmp/keep.gguf" --seed 9
cmp -s "$tmp/keep.gguf" "$tmp/m.gguf" && bad "synth -o over a model did not replace it" || ok
# inspect on a FIFO answers at once instead of hanging in open
expect 1 1 timeout 10 "$octo" inspect -m "$tmp/fifo"
grep -q "not a regular file" "$tmp/err" && ok || bad "inspect FIFO: $(cat "$tmp/err")"
# tokenize prints exactly the ids it has: byte fallback makes more ids than bytes
text=$(i=0; while [ $i -lt 3000 ]; do printf ' \303'; i=$((i + 1)); done)
expect 0 0 "$octo" tokenize -m "$tmp/m.gguf" --text "$text" --no-bos
# the synthetic vocabulary has no lone "▁": 3 byte ids for it, then 4 a repetition (space, then \303's byte)
n=$(wc -w <"$tmp/out")
[ "$n" -eq 12003 ] && ok || bad "tokenize printed $n ids, want 12003"
[ -z "$(tr ' ' '\n' <"$tmp/out" | awk '$1 >= 300')" ] && ok || bad "tokenize printed ids outside the vocabulary"
# eval on an endless input stops at the text limit; budgets that mean nothing are refused
expect 1 1 "$octo" eval -m "$tmp/m.gguf" -f /dev/zero
grep -q "MiB" "$tmp/err" && ok || bad "eval /dev/zero: $(cat "$tmp/err")"
expect 2 1 "$octo" eval -m "$tmp/m.gguf" -f "$tmp/t.txt" --kv-budget nan%
expect 1 1 "$octo" eval -m "$tmp/m.gguf" -f "$tmp/t.txt" --kv-budget 0.000001%
grep -q "rounds to 0" "$tmp/err" && ok || bad "tiny budget: $(cat "$tmp/err")"
expect 1 1 "$octo" run -m "$tmp/m.gguf" -p ab -n 2 --cache-dir /nonexistent/dir
grep -q "no such directory" "$tmp/err" && ok || bad "cache dir: $(cat "$tmp/err")"
# a generation cut short is not a success: a full context exits 1, Ctrl-C 130, each with one line
expect 1 1 "$octo" run -m "$tmp/m.gguf" -p ab -n 200 --ctx 16 --temp 0
grep -q "context is full" "$tmp/err" && ok || bad "context full: $(cat "$tmp/err")"
# a grammar that never lets the text end: 99,000 tokens (about 10 s) unless interrupted. (Greedy alone stopped at
# its end of text after ~8,900 tokens, which took 14 s only while every aged block was re-laid at every commit.)
printf 'root ::= [a-z] root\n' >"$tmp/endless.gbnf"
"$octo" run -m "$tmp/big.gguf" -p ab -n 99000 --temp 0 --spec none --grammar-file "$tmp/endless.gbnf" >"$tmp/out" 2>"$tmp/err" &
pid=$!
sleep 1
kill -INT $pid
wait $pid
rc=$?
[ $rc -eq 130 ] && grep -q "interrupted" "$tmp/err" && ok || bad "SIGINT: exit $rc, $(cat "$tmp/err")"
# --chat: a 20 000-byte line is one turn, and a history longer than the context forgets its oldest turns
(head -c 20000 /dev/zero | tr '\0' 'a'; echo; i=0; while [ $i -lt 12 ]; do echo "ab ab ab ab"; i=$((i + 1)); done) |
    "$octo" run -m "$tmp/m.gguf" --chat -n 8 --ctx 64 --temp 0 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && [ "$(wc -l <"$tmp/out")" -eq 12 ] && [ "$(grep -c 'the context holds' "$tmp/err")" -eq 1 ] && ok ||
    bad "--chat long line / long history: exit $rc, $(wc -l <"$tmp/out") replies, $(cat "$tmp/err")"

# against llama.cpp: the stories260K prompt "Once upon a time" row by row
if [ -n "$shared" ] && [ -f "$shared/golden/cases/stories260k-once.txt" ]; then
    toks=$(sed -n 's/^prompt_tokens: //p' "$shared/golden/cases/stories260k-once.txt")
    expect 0 0 "$octo" logits -m "$shared/golden/models/stories260K.gguf" --tokens "$toks" --out "$tmp/s.f32"
    maxd=$(od -An -v -f "$tmp/s.f32" | tr -s ' ' '\n' | grep -v '^$' >"$tmp/a"; \
           od -An -v -f "$shared/golden/cases/stories260k-once.prompt.f32" | tr -s ' ' '\n' | grep -v '^$' >"$tmp/b"; \
           paste "$tmp/a" "$tmp/b" | awk 'BEGIN{m=0; n=0} {d=$1-$2; if (d<0) d=-d; if (d>m) m=d; n++} END{printf "%d %.3g", n, m}')
    n=${maxd% *}; d=${maxd#* }
    [ "$n" -eq $((5 * 512)) ] && ok || bad "stories260K logits count $n"
    awk "BEGIN{exit !($d <= 0.001)}" && ok || bad "stories260K logits differ from llama.cpp by $d"
    echo "stories260K via 'octo logits': max |diff| vs llama.cpp = $d over $n logits"
    # --prompt tokenizes like --tokens with the golden ids
    expect 0 0 "$octo" logits -m "$shared/golden/models/stories260K.gguf" --prompt "Once upon a time" --out "$tmp/p.f32"
    cmp -s "$tmp/s.f32" "$tmp/p.f32" && ok || bad "logits --prompt differs from --tokens"

    # tokenize / detokenize
    model=$shared/models/stories260K.gguf
    case_once=$shared/golden/cases/stories260k-once.txt
    expect 0 0 "$octo" tokenize -m "$model" --text "Once upon a time"
    [ "$(cat "$tmp/out")" = "$toks" ] && ok || bad "tokenize: $(cat "$tmp/out") want $toks"
    expect 0 0 "$octo" tokenize -m "$model" --text "Once upon a time" --no-bos
    [ "$(cat "$tmp/out")" = "${toks#1 }" ] && ok || bad "tokenize --no-bos: $(cat "$tmp/out")"
    printf 'Hi\nthere\n' >"$tmp/t.txt"
    expect 0 0 "$octo" tokenize -m "$model" -f "$tmp/t.txt" --no-bos
    ids=$(cat "$tmp/out")
    expect 0 0 "$octo" detokenize -m "$model" --ids "$ids"
    cmp -s "$tmp/out" "$tmp/t.txt" && ok || bad "detokenize(tokenize(file)) differs: '$(cat "$tmp/out")'"
    expect 0 0 "$octo" detokenize -m "$model" --ids "${toks#1 }"
    [ "$(cat "$tmp/out")" = "Once upon a time" ] && ok || bad "detokenize: '$(cat "$tmp/out")'"
    expect 1 1 "$octo" detokenize -m "$model" --ids "5 512"
    grep -q "512" "$tmp/err" && ok || bad "detokenize range message"

    # octo run --temp 0 prints llama.cpp's greedy continuation, byte for byte
    want=$(sed -n 's/^greedy_text: "\(.*\)"$/\1/p' "$case_once")
    n=$(sed -n 's/^n_greedy: //p' "$case_once")
    case $want in *\\*) bad "the golden text has escapes this check cannot read";; esac
    expect 0 0 "$octo" run -m "$model" -p "Once upon a time" --temp 0 -n "$n"
    [ "$(cat "$tmp/out")" = "$want" ] && ok || bad "octo run: '$(cat "$tmp/out")' want '$want'"
    echo "octo run --temp 0 on stories260K: '$(cat "$tmp/out")'"
else
    echo "note: no shared data; the llama.cpp comparison was not run"
fi

# the other architectures: synth makes each, inspect names its features, run decodes
for spec in "qwen2moe:shared expert 256 wide, sigmoid-gated" "olmoe:q/k RMS norms" "granitemoe:residual x0.22" \
            "phi3:fused q/k/v" "gemma2:sliding window of 4096 on every 2 layers" "deepseek2:latent attention: q rank 64, kv rank 32"; do
    arch=${spec%%:*}; feat=${spec#*:}
    ex=""; case $arch in qwen2moe|olmoe|granitemoe|deepseek2) ex="--experts 4 --experts-used 2";; esac
    expect 0 0 "$octo" synth -o "$tmp/$arch.gguf" --arch "$arch" --type q8_0 --embd 128 --heads 4 --kv-heads 2 --ff 128 $ex
    expect 0 0 "$octo" inspect -m "$tmp/$arch.gguf"
    grep -q "^architecture: *$arch" "$tmp/out" && grep -q "^features:.*$feat" "$tmp/out" && ok ||
        bad "inspect $arch: $(grep -E '^(architecture|features)' "$tmp/out")"
    expect 0 0 "$octo" run -m "$tmp/$arch.gguf" -p "hello" -n 4 --temp 0
done
# quantize: a line per tensor on stderr, the sizes on stdout; bad types and missing files are errors
"$octo" quantize -m "$tmp/m.gguf" -o "$tmp/q.gguf" --type q4_0 >"$tmp/out" 2>"$tmp/err"
[ $? -eq 0 ] && [ "$(grep -c '^quantize: \[' "$tmp/err")" -eq 21 ] && grep -q "^quantized: .* as q4_0" "$tmp/out" && ok ||
    bad "quantize: $(cat "$tmp/err" "$tmp/out" | tail -3)"
expect 0 0 "$octo" inspect -m "$tmp/q.gguf"
grep -q "Q4_0=" "$tmp/out" && ok || bad "quantized model: $(grep tensors "$tmp/out")"
expect 2 1 "$octo" quantize -m "$tmp/m.gguf" -o "$tmp/q.gguf" --type q9_9
grep -q "q4_k_m" "$tmp/err" && ok || bad "quantize unknown type: $(cat "$tmp/err")"
expect 2 1 "$octo" quantize -m "$tmp/m.gguf" --type q4_0
expect 1 1 "$octo" quantize -m /nonexistent.gguf -o "$tmp/q.gguf" --type q4_0 --quiet
expect 1 1 "$octo" quantize -m "$tmp/m.gguf" -o "$tmp/no-such-dir/q.gguf" --type q4_0 --quiet
[ ! -e "$tmp/no-such-dir" ] && ok || bad "quantize left something behind"

# plan: a row per device, the reasons, JSON that names each device once
expect 0 0 "$octo" plan -m "$tmp/q.gguf" --device all
[ "$(grep -cE '^(host|iphone-15-pro|iphone-14|pixel-8|galaxy-s24|android-4gb-emmc) ' "$tmp/out")" -eq 6 ] &&
    grep -q "^  weights " "$tmp/out" && ok || bad "plan table: $(head -3 "$tmp/out")"
expect 0 0 "$octo" plan -m "$tmp/q.gguf" --device all --json
[ "$(grep -c '"device":' "$tmp/out")" -eq 6 ] && ok || bad "plan --json: $(head -3 "$tmp/out")"
if command -v python3 >/dev/null; then
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); assert [d["device"] for d in p][0] == "host"' "$tmp/out" &&
        ok || bad "plan --json is not JSON"
fi
expect 1 1 "$octo" plan -m "$tmp/q.gguf" --device nokia-3310
grep -q "unknown device 'nokia-3310' (known: host," "$tmp/err" && ok || bad "plan unknown device: $(cat "$tmp/err")"
# deploy: a folder per device that runs as the GGUF does; bad input is one line and leaves nothing
expect 0 0 "$octo" deploy -q -m "$tmp/q.gguf" --device host,pixel-8 -o "$tmp/dep"
[ -s "$tmp/dep/host/weights.octo" ] && [ -s "$tmp/dep/pixel-8/plan.json" ] && grep -q "^octo-bundle 1" "$tmp/dep/host/manifest" &&
    ok || bad "deploy folders: $(ls -R "$tmp/dep")"
"$octo" run -m "$tmp/q.gguf" -p "hello" -n 8 --temp 0 --spec none >"$tmp/a.txt" 2>&1
"$octo" run -m "$tmp/dep" -p "hello" -n 8 --temp 0 --spec none >"$tmp/b.txt" 2>&1
cmp -s "$tmp/a.txt" "$tmp/b.txt" && [ -s "$tmp/a.txt" ] && ok || bad "bundle output: $(cat "$tmp/a.txt") / $(cat "$tmp/b.txt")"
expect 0 0 "$octo" inspect -m "$tmp/dep" --device pixel-8
# the phone's folder is in the packed layout NEON reads when this host packs (one layout for every path)
if grep -q '"weights_packed": true' "$tmp/dep/host/plan.json"; then want="packed in the file"; else want="read-only"; fi
grep -q "^weights: .*$want" "$tmp/out" && ok || bad "inspect bundle: $(grep weights "$tmp/out") (want $want)"
expect 1 1 "$octo" deploy -m "$tmp/q.gguf" --device host,moto-g -o "$tmp/dep2"
expect 1 1 "$octo" deploy -m "$tmp/q.gguf" --device host --type q9_9 -o "$tmp/dep2"
expect 1 1 "$octo" deploy -m "$tmp/q.gguf" --device host -o "$tmp/no-such-dir/sub"
expect 1 1 "$octo" deploy -m "$tmp/q.gguf" --device host -o /sys/octo-bundle   # a read-only file system
grep -q "cannot create /sys/octo-bundle" "$tmp/err" && ok || bad "deploy to a read-only place: $(cat "$tmp/err")"
[ ! -e "$tmp/dep2" ] && [ ! -e "$tmp/no-such-dir" ] && ok || bad "deploy left something behind"
if grep -q '"weights_packed": true' "$tmp/dep/host/plan.json"; then
    # a path without packed kernels refuses the bundle; every path with them reads it, to the same text
    OCTO_CPU=scalar expect 1 1 "$octo" run -m "$tmp/dep" -p "hello" -n 2
    grep -q "deploy for this device" "$tmp/err" && ok || bad "packed bundle on the scalar path: $(cat "$tmp/err")"
    if grep -q avx2 /proc/cpuinfo 2>/dev/null; then
        OCTO_CPU=avx2 "$octo" run -m "$tmp/dep" -p "hello" -n 8 --temp 0 --spec none >"$tmp/c.txt" 2>&1
        OCTO_CPU=avx2 "$octo" run -m "$tmp/q.gguf" -p "hello" -n 8 --temp 0 --spec none >"$tmp/d.txt" 2>&1
        cmp -s "$tmp/c.txt" "$tmp/d.txt" && [ -s "$tmp/c.txt" ] && ok ||
            bad "the bundle on the avx2 path: $(cat "$tmp/c.txt") / $(cat "$tmp/d.txt")"
    fi
fi
printf 'x' | dd of="$tmp/dep/host/weights.octo" bs=1 seek=5000 conv=notrunc 2>/dev/null
expect 1 1 "$octo" run -m "$tmp/dep" -p "hello" -n 2
grep -q "fails its checksum" "$tmp/err" && ok || bad "altered bundle: $(cat "$tmp/err")"

# a file octo cannot run: inspect says what it is and why; tokenize needs only its vocabulary
if command -v python3 >/dev/null; then
    "$octo" synth -o "$tmp/mamba.gguf" --vocab 300 --embd 64 --layers 1 --heads 4 --kv-heads 2 --ff 96 >/dev/null 2>&1
    python3 -c 'import sys
b = bytearray(open(sys.argv[1], "rb").read()); i = b.find(b"llama", b.find(b"general.architecture"))
b[i:i + 5] = b"mamba"; open(sys.argv[1], "wb").write(bytes(b))' "$tmp/mamba.gguf"
    expect 1 1 "$octo" inspect -m "$tmp/mamba.gguf"
    grep -q "^architecture: *mamba" "$tmp/out" && grep -q "^runs: *no: .*'mamba' is not supported" "$tmp/out" &&
        grep -q "^vocabulary: *300 tokens" "$tmp/out" && ok || bad "inspect of an unsupported file: $(cat "$tmp/out")"
    expect 0 0 "$octo" tokenize -m "$tmp/mamba.gguf" --text "hello"
    [ "$(cat "$tmp/out")" = "$("$octo" tokenize -m "$tmp/q.gguf" --text "hello")" ] && ok || bad "tokenize on mamba: $(cat "$tmp/out")"
    expect 0 0 "$octo" detokenize -m "$tmp/mamba.gguf" --ids "1 266 104"
fi

# a chat that passes its context keeps going: 20 turns on stories260K (512 tokens), the oldest
# exchanges dropped as needed (said on stderr); /stats, /reset, /exit are commands
if [ -n "$shared" ] && [ -f "$shared/models/stories260K.gguf" ]; then
    i=0; : >"$tmp/chat.txt"
    while [ $i -lt 20 ]; do echo "Tell me a story about a little girl and her dog who went to the park one day" >>"$tmp/chat.txt"; i=$((i + 1)); done
    "$octo" run -m "$shared/models/stories260K.gguf" --chat -n 64 --ids --temp 0 <"$tmp/chat.txt" >"$tmp/out" 2>"$tmp/err"
    [ $? -eq 0 ] && [ "$(grep -c . "$tmp/out")" -eq 20 ] && grep -q "oldest exchange" "$tmp/err" && ok ||
        bad "20-turn chat: $(grep -c . "$tmp/out") replies; $(tail -2 "$tmp/err")"
    printf 'hello\n/stats\n/reset\n/exit\nnever answered\n' |
        "$octo" run -m "$shared/models/stories260K.gguf" --chat -n 4 --ids --temp 0 >"$tmp/out" 2>"$tmp/err"
    [ $? -eq 0 ] && [ "$(grep -c . "$tmp/out")" -eq 1 ] && grep -q "^context " "$tmp/err" && grep -q "was reset" "$tmp/err" &&
        ok || bad "chat commands: $(cat "$tmp/out" "$tmp/err" | head -5)"
fi

# a full context does not cut a reply: before each turn, the oldest exchanges go until the history
# and -n tokens fit. 20 turns of -n 32 in 256 tokens: 20 replies, none stopped by the context
# (dropping only after a cut reply cut 5). How many reach 32 tokens rather than end on their own
# depends on the greedy text, which each kernel path's sums may change: it is printed, not asserted.
if [ -n "$shared" ] && [ -f "$shared/models/stories260K.gguf" ]; then
    i=0; : >"$tmp/chat20.txt"
    while [ $i -lt 20 ]; do echo "Tell me a story about a little girl and her dog who went to the park one day" >>"$tmp/chat20.txt"; i=$((i + 1)); done
    "$octo" run -m "$shared/models/stories260K.gguf" --chat --ctx 256 -n 32 --ids --temp 0 <"$tmp/chat20.txt" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    replies=$(grep -c . "$tmp/out"); whole=$(awk 'NF == 32' "$tmp/out" | wc -l); cut=$(grep -c "stopped after" "$tmp/err")
    [ $rc -eq 0 ] && [ "$replies" -eq 20 ] && [ "$whole" -ge 1 ] && [ "$cut" -eq 0 ] && grep -q "make room for the reply" "$tmp/err" &&
        ok || bad "20-turn chat, -n 32 in 256: exit $rc, $replies replies, $whole of 32 tokens, $cut cut: $(grep . "$tmp/out" | awk '{printf "%d ", NF}')"
fi

# eval --prompt: a prefill, then only the continuation scored
printf 'Once upon a time there was a little girl who liked to play in the garden with her dog every day.\n' >"$tmp/t.txt"
expect 0 0 "$octo" eval -m "$tmp/q.gguf" -f "$tmp/t.txt" --prompt 8 --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["prompt"] == 8 and d["scored"] == d["tokens"] - 8, d' "$tmp/out" &&
    ok || bad "eval --prompt: $(head -c 200 "$tmp/out")"
expect 1 1 "$octo" eval -m "$tmp/q.gguf" -f "$tmp/t.txt" --prompt 100000
grep -q "leaves nothing to score" "$tmp/err" && ok || bad "eval --prompt too long: $(cat "$tmp/err")"

# the CLI people know: positional model and prompt, -f, stdin, -t, -h, --version, suggestions, JSON
expect 0 0 "$octo" --version
grep -qE "^octo [0-9]+\.[0-9]+\.[0-9]+$" "$tmp/out" && ok || bad "--version: $(cat "$tmp/out")"
"$octo" run -m "$tmp/q.gguf" -p "hello" -n 6 --temp 0 >"$tmp/a.txt" 2>/dev/null
"$octo" run "$tmp/q.gguf" "hello" -n 6 --temp 0 -t 1 >"$tmp/b.txt" 2>/dev/null
cmp -s "$tmp/a.txt" "$tmp/b.txt" && ok || bad "positional model and prompt differ from -m/-p"
printf 'hello\n' >"$tmp/prompt.txt"
"$octo" run "$tmp/q.gguf" -f "$tmp/prompt.txt" -n 6 --temp 0 >"$tmp/b.txt" 2>/dev/null
cmp -s "$tmp/a.txt" "$tmp/b.txt" && ok || bad "-f FILE differs from -p"
printf 'hello' | "$octo" run "$tmp/q.gguf" - -n 6 --temp 0 >"$tmp/b.txt" 2>/dev/null
cmp -s "$tmp/a.txt" "$tmp/b.txt" && ok || bad "stdin prompt differs from -p"
expect 0 0 "$octo" run -h
grep -q "^  run " "$tmp/out" && ! grep -q "^  bench " "$tmp/out" && ok || bad "run -h: $(head -2 "$tmp/out")"
expect 0 0 "$octo" quantize --help
grep -q "^  quantize " "$tmp/out" && ok || bad "quantize --help"
expect 2 1 "$octo" run "$tmp/q.gguf" hello --temprature 0.5
grep -q "did you mean --temp?" "$tmp/err" && ok || bad "suggestion: $(cat "$tmp/err")"
expect 2 1 "$octo" bench -m "$tmp/q.gguf" --jsn
grep -q "did you mean --json?" "$tmp/err" && ok || bad "suggestion: $(cat "$tmp/err")"
expect 2 1 "$octo" run "$tmp/q.gguf" hello --frobnicate
grep -q "did you mean" "$tmp/err" && bad "a suggestion for nonsense: $(cat "$tmp/err")" || ok
"$octo" run "$tmp/q.gguf" hello -n 4 --temp 0 --stats --json 2>"$tmp/err" >/dev/null
tail -1 "$tmp/err" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["decode_tokens"] == 4
assert d["decode_latency_tokens"] == 3 and 0 <= d["decode_latency_p50_ms"] <= d["decode_latency_p99_ms"] <= d["decode_latency_max_ms"]
assert d["cpu_threads"] >= 1 and " threads" in d["cpu_note"]' && ok ||
    bad "run --stats --json: $(tail -1 "$tmp/err")"
# its keys, their order and each number's format: the run column of the list (OCTO_STATS, octo.h);
# the numbers in keys (decode_latency_p50_ms) stay
shape=$(tail -1 "$tmp/err" | python3 -c 'import re, sys
t = re.sub(r"\"(mem_watch|mem_note|cpu_note|cpu_hint|cpu_kernels)\": \"(?:[^\"\\]|\\.)*\"", "\"\\1\": \"%s\"", sys.stdin.read().strip())
print(re.sub(r"(?<![a-z_0-9])-?\d+(\.(\d+))?", lambda m: "%%.%df" % len(m.group(2)) if m.group(2) else "%d", t))')
[ "$shape" = '{"prompt_tokens": %d, "prefill_tokens": %d, "prefill_ms": %.3f, "prefill_tokens_per_s": %.3f, "decode_tokens": %d, "decode_ms": %.3f, "decode_tokens_per_s": %.3f, "time_to_first_token_ms": %.3f, "context_tokens": %d, "context_size": %d, "kv_bytes": %d, "kv_budget_bytes": %d, "kv_tokens_evicted": %d, "kv_policy": "morphkv", "spec_proposer": "ngram", "spec_proposed": %d, "spec_accepted": %d, "spec_steps": %d, "spec_k": %d, "spec_tree_passes": %d, "spec_off_line": %d, "spec_ahead_used": %d, "spec_ahead_dropped": %d, "spec_draft_ms": %.3f, "spec_ms": %.3f, "speculative_acceptance_rate": %.4f, "expert_cache_hit_rate": %.4f, "expert_bytes_read": %d, "rss_bytes": %d, "peak_rss_bytes": %d, "chat_template": "plain", "prefill_speckv": %d, "prefill_lookahead_tokens": %d, "prefill_draft_ms": %.3f, "prompt_tokens_dropped": %d, "mem_level": %d, "mem_trims": %d, "mem_regrows": %d, "mem_pressure_events": %d, "mem_released_weights_bytes": %d, "mem_released_draft_bytes": %d, "mem_released_experts_bytes": %d, "mem_released_kv_bytes": %d, "weights_packed_bytes": %d, "mem_room_bytes": %d, "mem_watch": "%s", "mem_note": "%s", "decode_latency_tokens": %d, "decode_latency_p50_ms": %.3f, "decode_latency_p90_ms": %.3f, "decode_latency_p95_ms": %.3f, "decode_latency_p99_ms": %.3f, "decode_latency_max_ms": %.3f, "decode_latency_cv": %.4f, "cpu_threads": %d, "cpu_effective": %.2f, "cpu_changes": %d, "cpu_probes": %d, "cpu_spin": %d, "cpu_paced": %d, "cpu_note": "%s", "cpu_hint": "%s", "cpu_kernels": "%s", "adapter_bytes": %d, "mem_released_adapter_bytes": %d, "notes": []}' ] &&
    ok || bad "run --stats --json's keys and formats: $shape"
expect 0 0 "$octo" inspect -m "$tmp/q.gguf" --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["arch"] == "llama" and d["n_vocab"] == 300' "$tmp/out" &&
    ok || bad "inspect --json: $(head -c 200 "$tmp/out")"
a=$("$octo" run "$tmp/q.gguf" hello -n 24 2>/dev/null); b=$("$octo" run "$tmp/q.gguf" hello -n 24 2>/dev/null)
c=$("$octo" run "$tmp/q.gguf" hello -n 24 --seed 9 2>/dev/null); d=$("$octo" run "$tmp/q.gguf" hello -n 24 --seed 9 2>/dev/null)
[ "$a" != "$b" ] && [ "$c" = "$d" ] && ok || bad "seeds: unseeded runs equal, or seeded ones differ"

expect 1 1 "$octo" synth -o "$tmp/x.gguf" --arch olmoe
grep -q "needs --experts\|give --experts" "$tmp/err" && ok || bad "synth olmoe without experts: $(cat "$tmp/err")"
expect 1 1 "$octo" synth -o "$tmp/x.gguf" --arch mamba
grep -q "mamba" "$tmp/err" && ok || bad "synth unknown architecture: $(cat "$tmp/err")"

# ---- issue 35: what an output path, a symlink, an interrupt and a FIFO did to octo's files ----
# 1, 2: an output that is an input (the same file, by its path or a hard link) is refused before
# anything is written, and the model stays whole
"$octo" synth -o "$tmp/in.gguf" --type q8_0 --vocab 300 --embd 64 --layers 2 --heads 4 --kv-heads 2 --ff 64 \
    --experts 4 --experts-used 2 --seed 7 >/dev/null
cp "$tmp/in.gguf" "$tmp/in.copy"
ln "$tmp/in.gguf" "$tmp/in.link"
expect 1 1 "$octo" run -m "$tmp/in.gguf" -p ab -n 4 --moe-cache 1 --moe-trace "$tmp/in.gguf"
grep -q "is an input" "$tmp/err" && ok || bad "run --moe-trace MODEL: $(cat "$tmp/err")"
expect 1 1 "$octo" logits -m "$tmp/in.gguf" --tokens "1 2 3" --out "$tmp/in.gguf"
grep -q "is an input" "$tmp/err" && ok || bad "logits --out MODEL: $(cat "$tmp/err")"
expect 1 1 "$octo" quantize -m "$tmp/in.gguf" -o "$tmp/in.gguf" --type q4_0 -q
expect 1 1 "$octo" quantize -m "$tmp/in.gguf" -o "$tmp/in.link" --type q4_0 -q
grep -q "is an input" "$tmp/err" && ok || bad "quantize -o a hard link of the input: $(cat "$tmp/err")"
"$octo" synth -o "$tmp/dense.gguf" --type q8_0 --vocab 300 --embd 64 --layers 2 --heads 4 --kv-heads 2 --ff 96 >/dev/null
cp "$tmp/dense.gguf" "$tmp/dense.copy"
expect 1 1 "$octo" upcycle -m "$tmp/dense.gguf" -o "$tmp/dense.gguf" --experts 4 --experts-used 2 --split random \
    --router uniform
grep -q "is an input" "$tmp/err" && ok || bad "upcycle -o INPUT: $(cat "$tmp/err")"
cmp -s "$tmp/in.gguf" "$tmp/in.copy" && cmp -s "$tmp/dense.gguf" "$tmp/dense.copy" && ok || bad "an input was changed"
# 3: deploy never follows a link in the output folder, and replaces a bundle holding a subfolder whole
mkdir -p "$tmp/dep35" "$tmp/victim35"
echo keep >"$tmp/victim35/manifest"
echo keep >"$tmp/victim35/other"
ln -s ../victim35 "$tmp/dep35/host"
expect 1 1 "$octo" deploy -m "$tmp/dense.gguf" --device host -o "$tmp/dep35" -q
grep -q "symbolic link" "$tmp/err" && [ -L "$tmp/dep35/host" ] && [ -f "$tmp/victim35/manifest" ] &&
    [ -f "$tmp/victim35/other" ] && ok || bad "deploy over a link: $(cat "$tmp/err"); victim: $(ls "$tmp/victim35")"
rm "$tmp/dep35/host"
expect 0 0 "$octo" deploy -m "$tmp/dense.gguf" --device host -o "$tmp/dep35" -q
mkdir "$tmp/dep35/host/sub" && echo x >"$tmp/dep35/host/sub/f"
expect 0 0 "$octo" deploy -m "$tmp/dense.gguf" --device host -o "$tmp/dep35" -q
[ "$(ls -A "$tmp/dep35")" = host ] && [ ! -e "$tmp/dep35/host/sub" ] && ok || bad "deploy left: $(ls -A "$tmp/dep35")"
# 11: an interrupted quantize (SIGTERM) or deploy (SIGINT) leaves no temporary file or folder. The
# signal goes once the command writes in the folder: an open file there (named, or unnamed: O_TMPFILE)
# or deploy's half-made device folder. A background job of sh ignores SIGINT unless it sets its own.
writing() { # PID DIR: does PID have a file open in DIR, or DIR a half-made folder?
    ls -l "/proc/$1/fd" 2>/dev/null | grep -q " -> $2/[.#]" || ls -A "$2" | grep -q '^\.host\.tmp-'
}
interrupt() { # SIGNAL DIR CMD...: the command in the background, the signal once it writes in DIR
    sig=$1 dir=$2
    shift 2
    "$@" >/dev/null 2>&1 &
    p=$! i=0
    while [ $i -lt 1500 ] && kill -0 $p 2>/dev/null && ! writing $p "$dir"; do sleep 0.01; i=$((i + 1)); done
    kill -"$sig" $p 2>/dev/null
    wait $p
}
mkdir -p "$tmp/int"
"$octo" synth -o "$tmp/big.gguf" --type f16 --vocab 8000 --embd 512 --layers 4 --heads 8 --kv-heads 8 --ff 1408 \
    >/dev/null
interrupt TERM "$tmp/int" "$octo" quantize -m "$tmp/big.gguf" -o "$tmp/int/q.gguf" --type q4_k -q
rc=$?
[ $rc -eq 143 ] && [ -z "$(ls -A "$tmp/int")" ] && ok || bad "quantize interrupted: exit $rc, left $(ls -A "$tmp/int")"
interrupt INT "$tmp/int" "$octo" deploy -m "$tmp/big.gguf" --device host -o "$tmp/int" -q
rc=$?
[ $rc -eq 130 ] && [ -z "$(ls -A "$tmp/int")" ] && ok || bad "deploy interrupted: exit $rc, left $(ls -A "$tmp/int")"
rm -f "$tmp/big.gguf"
# 12: a FIFO in place of a bundle's weights or of MODEL.int2 is refused at once, never read
expect 0 0 "$octo" deploy -m "$tmp/dense.gguf" --device host -o "$tmp/fifo-dep" -q
rm "$tmp/fifo-dep/host/weights.octo" && mkfifo "$tmp/fifo-dep/host/weights.octo"
expect 1 1 timeout 10 "$octo" run -m "$tmp/fifo-dep" -p ab -n 2
grep -q "not a regular file" "$tmp/err" && ok || bad "a FIFO as weights.octo: $(cat "$tmp/err")"
mkfifo "$tmp/in.gguf.int2"
expect 1 1 timeout 10 "$octo" run -m "$tmp/in.gguf" -p ab -n 2 --moe-cache 1 --moe-int2 on
grep -q "special file\|not a regular file" "$tmp/err" && ok || bad "a FIFO as MODEL.int2: $(cat "$tmp/err")"

# structured output: a schema's text parses and holds it; a grammar's text is one of its sentences;
# a bad schema, a bad grammar and both at once are one-line errors
printf '{"type":"object","properties":{"n":{"type":"integer","minimum":3,"maximum":9},"w":{"enum":["yes","no"]}},"required":["n","w"]}' >"$tmp/s.json"
printf 'root ::= "The " ("cat" | "dog") " is " [a-z]{2,5} "."\n' >"$tmp/g.gbnf"
expect 0 0 "$octo" run -m "$tmp/m.gguf" -p ab -n 64 --temp 1 --seed 4 --json-schema "$tmp/s.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert sorted(d) == ["n", "w"] and 3 <= d["n"] <= 9 and d["w"] in ("yes", "no"), d' \
    "$tmp/out" && ok || bad "run --json-schema: $(cat "$tmp/out")"
expect 0 0 "$octo" run -m "$tmp/m.gguf" -p ab -n 64 --temp 1 --seed 5 --grammar "$tmp/g.gbnf"
grep -Eq '^The (cat|dog) is [a-z]{2,5}\.$' "$tmp/out" && ok || bad "run --grammar: $(cat "$tmp/out")"
printf '{"type":"string","not":{}}' >"$tmp/bad.json"
expect 1 1 "$octo" run -m "$tmp/m.gguf" -p ab -n 4 --json-schema "$tmp/bad.json"
grep -q "keyword 'not' is not supported" "$tmp/err" && ok || bad "an unsupported keyword: $(cat "$tmp/err")"
printf 'root ::= x\n' >"$tmp/bad.gbnf"
expect 1 1 "$octo" run -m "$tmp/m.gguf" -p ab -n 4 --grammar "$tmp/bad.gbnf"
grep -q "line 1: rule 'x' is used but never defined" "$tmp/err" && ok || bad "a bad grammar: $(cat "$tmp/err")"
expect 1 1 "$octo" run -m "$tmp/m.gguf" -p ab -n 4 --grammar "$tmp/g.gbnf" --json-schema "$tmp/s.json"
expect 1 1 "$octo" run -m "$tmp/m.gguf" -p ab -n 4 --grammar "$tmp/none.gbnf"

# llama.cpp's habits (the README's table): each of its spellings gives the text octo's gives, byte for byte,
# and every spelling tested here is in the table; options octo has no use for are said, once
src=$(cd "$(dirname "$0")/.." && pwd)
emb="$src/models/stories260K.gguf"
printf 'Once upon a time' >"$tmp/p.txt"
printf 'root ::= "The " ("cat" | "dog") " is " [a-z]{2,5} "."' >"$tmp/g2.gbnf"
printf '{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}' >"$tmp/s2.json"
printf 'root ::= "The" ("cat" | "dog")' >"$tmp/g1.gbnf"
while IFS='#' read -r word llama ours; do
    # shellcheck disable=SC2086 # the words of each spelling
    "$octo" run $llama -n 12 --temp 0.7 -s 11 >"$tmp/l.txt" 2>"$tmp/l.err" &&
        "$octo" run $ours -n 12 --temp 0.7 -s 11 >"$tmp/o.txt" 2>"$tmp/o.err" &&
        cmp -s "$tmp/l.txt" "$tmp/o.txt" && [ -s "$tmp/o.txt" ] && ok || bad "'$llama' differs from '$ours': $(cat "$tmp/l.err")"
    grep -q -e "\`$word\`" -e "\`$word " "$src/README.md" && ok || bad "$word is not in the README's table"
done <<EOF2
--model#--model $emb -p hi#-m $emb -p hi
--prompt#-m $emb --prompt hi#-m $emb -p hi
--file#-m $emb --file $tmp/p.txt#-m $emb -f $tmp/p.txt
-c#-m $emb -p hi -c 64#-m $emb -p hi --ctx 64
--ctx-size#-m $emb -p hi --ctx-size 64#-m $emb -p hi --ctx 64
--n-predict#-m $emb -p hi --n-predict 12#-m $emb -p hi -n 12
-s#-m $emb -p hi -s 11#-m $emb -p hi --seed 11
--threads#-m $emb -p hi --threads 1#-m $emb -p hi -t 1
--repeat-last-n#-m $emb -p hi --repeat-penalty 1.5 --repeat-last-n -1#-m $emb -p hi --repeat-penalty 1.5 --repeat-last-n 512
-md#-m $emb -p hi -md $emb#-m $emb -p hi --draft $emb
--model-draft#-m $emb -p hi --model-draft $emb#-m $emb -p hi --draft $emb
--draft-max#-m $emb -p hi --spec ngram --draft-max 3#-m $emb -p hi --spec ngram --spec-k 3
--grammar-file#-m $emb -p hi --grammar-file $tmp/g2.gbnf#-m $emb -p hi --grammar $tmp/g2.gbnf
--grammar#-m $emb -p hi --grammar root::="The"("cat"|"dog")#-m $emb -p hi --grammar $tmp/g1.gbnf
-jf#-m $emb -p hi -jf $tmp/s2.json#-m $emb -p hi --json-schema $tmp/s2.json
--json-schema-file#-m $emb -p hi --json-schema-file $tmp/s2.json#-m $emb -p hi --json-schema $tmp/s2.json
-j#-m $emb -p hi -j {"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}#-m $emb -p hi --json-schema $tmp/s2.json
-ngl#-m $emb -p hi -ngl 99#-m $emb -p hi
--n-gpu-layers#-m $emb -p hi --n-gpu-layers 99 --mlock --no-mmap -b 512 -ub 512 -ctk q8_0 -ctv q8_0 -no-cnv#-m $emb -p hi
EOF2
"$octo" run -m "$emb" -p hi --grammar 'root::="The"("cat"|"dog")' -n 16 --temp 0 >"$tmp/out" 2>"$tmp/err" &&
    grep -Eq '^The(cat|dog)$' "$tmp/out" && ok || bad "an inline grammar: $(cat "$tmp/out" "$tmp/err")"
expect 0 3 "$octo" run -m "$emb" -p hi -n 4 -ngl 99 --n-gpu-layers 5 --mlock
grep -q "^octo: note: octo runs on the CPU: -ngl is ignored$" "$tmp/err" && grep -q "^octo: note: --mlock is ignored" "$tmp/err" &&
    ok || bad "-ngl's note: $(cat "$tmp/err")"
# -fa, -fa on, --flash-attn auto: a note (octo's attention is always fused), never the end of a pasted script
for fa in "-fa" "-fa on" "--flash-attn auto" "-fa off"; do
    expect 0 1 "$octo" run -m "$emb" -p hi -n 2 $fa
    grep -q "^octo: note: ${fa%% *} is ignored: octo's attention always runs as one fused pass" "$tmp/err" && ok ||
        bad "$fa: $(cat "$tmp/err")"
done
expect 2 1 "$octo" run -m "$emb" -p hi -c 99999999
grep -q "(1 to 16777216)" "$tmp/err" && ok || bad "the context's limit is not named: $(cat "$tmp/err")"
expect 2 1 "$octo" run -m "$emb" -p hi -x 1
grep -q "did you mean" "$tmp/err" && bad "a misleading suggestion: $(cat "$tmp/err")" || ok
# -n -1: until the context is full, a success; the ids fill the context after the prompt's
n_prompt=$("$octo" tokenize -m "$emb" --text hi | wc -w)
expect 0 0 "$octo" run -m "$emb" -p hi -n -1 -c 40 --temp 1 -s 2 --ids --spec none
# (the last token is sampled from the full context's last logits, never fed: one more than the room)
[ "$(wc -w <"$tmp/out")" -eq $((40 - n_prompt + 1)) ] && ok || bad "-n -1 -c 40: $(wc -w <"$tmp/out") ids after $n_prompt"
# nothing silent: a context past the trained one, a draft that is not smaller, options greedy ignores
"$octo" run -m "$emb" -p hi -n 2 --temp 0 -c 1024 --top-k 4 -s 1 --draft "$emb" --stats --json >/dev/null 2>"$tmp/err"
grep -q "^octo: note: context 1024 tokens is past the model's trained 512; the file has no RoPE scaling" "$tmp/err" && ok ||
    bad "the context past training: $(cat "$tmp/err")"
grep -q "^octo: note: --top-k has no effect at --temp 0" "$tmp/err" && grep -q "^octo: note: --seed has no effect" "$tmp/err" &&
    ok || bad "greedy's unused options: $(cat "$tmp/err")"
grep -q "^octo: note: draft .* is not smaller than the model .*: it does not speculate" "$tmp/err" && ok ||
    bad "a draft not smaller: $(cat "$tmp/err")"
tail -1 "$tmp/err" | python3 -c 'import json,sys; n=json.load(sys.stdin)["notes"]; assert len(n) == 4, n
assert any("past the model" in x for x in n) and any("not smaller" in x for x in n), n' && ok ||
    bad "--stats --json notes: $(tail -1 "$tmp/err")"
expect 0 1 "$octo" run -m "$emb" -p hi -n 2 --spec none --spec-k 3
grep -q "^octo: note: --spec-k has no effect with --spec none" "$tmp/err" && ok || bad "--spec-k with --spec none: $(cat "$tmp/err")"
# quantize IN OUT TYPE [THREADS], llama-quantize's order: the same file as -m/-o/--type
"$octo" quantize "$emb" "$tmp/qa.gguf" Q8_0 2 >/dev/null 2>&1 && "$octo" quantize -m "$emb" -o "$tmp/qb.gguf" --type q8_0 -q >/dev/null &&
    cmp -s "$tmp/qa.gguf" "$tmp/qb.gguf" && ok || bad "quantize IN OUT TYPE differs from -m -o --type"
expect 2 1 "$octo" quantize "$emb" "$tmp/qa.gguf" Q8_0 2 extra
# run without a model: the embedded one, said once
# a first word with a space that names no file is the prompt: the embedded model reads it
expect 0 1 "$octo" run "Once upon a time" -n 3 --temp 0
grep -q "^octo: no model given (-m): running the embedded stories260K" "$tmp/err" && [ -s "$tmp/out" ] && ok ||
    bad "run PROMPT: $(cat "$tmp/err")"
"$octo" run -m "$emb" -p "Once upon a time" -n 3 --temp 0 2>/dev/null | cmp -s - "$tmp/out" && ok || bad "run PROMPT's text"
# the model as the first word, in every command that reads one; the embedded one where bench and serve get none
"$octo" inspect "$emb" 2>&1 | grep -v "^resident:" >"$tmp/i1" && "$octo" inspect -m "$emb" 2>&1 | grep -v "^resident:" >"$tmp/i2" &&
    cmp -s "$tmp/i1" "$tmp/i2" && grep -q "^parameters: " "$tmp/i1" && ok || bad "inspect MODEL: $(diff "$tmp/i1" "$tmp/i2")"
"$octo" tokenize "$emb" --text "Once upon" >"$tmp/k1" 2>&1 && "$octo" tokenize -m "$emb" --text "Once upon" >"$tmp/k2" 2>&1 &&
    cmp -s "$tmp/k1" "$tmp/k2" && [ -s "$tmp/k1" ] && ok || bad "tokenize MODEL: $(cat "$tmp/k1")"
"$octo" plan "$emb" >/dev/null 2>"$tmp/err" && ok || bad "plan MODEL: $(cat "$tmp/err")"
# a phone profile's plan counts the phone's cores, not this host's (device.c: makers' specifications)
for dev in pixel-8:5 android-4gb-emmc:2 iphone-15-pro:2; do
    "$octo" plan "$emb" --device "${dev%%:*}" --json | python3 -c 'import json, sys
d = json.load(sys.stdin); assert d["threads"] == int(sys.argv[1]) and "performance cores" in d["cores_reason"], d' "${dev##*:}" &&
        ok || bad "plan --device ${dev%%:*}: its threads"
done
expect 0 1 "$octo" bench -p 8 -n 4 -r 1
grep -q "^octo: no model given (-m): using the embedded stories260K" "$tmp/err" && grep -q "stories260K" "$tmp/out" && ok ||
    bad "bench without a model: $(cat "$tmp/err")"
expect 2 1 "$octo" inspect "$emb" "$emb"
# a misspelt command: the nearest one named
expect 2 1 "$octo" rn -p hi
grep -q "^octo: unknown command 'rn' (did you mean run?)" "$tmp/err" && ok || bad "octo rn: $(cat "$tmp/err")"
expect 2 1 "$octo" inpsect "$emb"
grep -q "did you mean inspect?" "$tmp/err" && ok || bad "octo inpsect: $(cat "$tmp/err")"
expect 2 1 "$octo" xyzzy
grep -q "did you mean" "$tmp/err" && bad "a suggestion for nonsense: $(cat "$tmp/err")" || ok
expect 0 1 "$octo" run -p hi -n 3
grep -q "^octo: no model given (-m): running the embedded stories260K" "$tmp/err" && [ -s "$tmp/out" ] && ok ||
    bad "run without -m: $(cat "$tmp/err")"

# finetune: usage and bad values; killed with SIGKILL after a checkpoint, the same command resumes to
# the bytes of a run never stopped
awk 'BEGIN { for (i = 0; i < 40; i++) print "Once upon a time there was a little cat. The cat liked to play with a red ball in the park." }' \
    >"$tmp/ft.txt"
expect 2 1 "$octo" finetune -m "$emb" -f "$tmp/ft.txt"
expect 2 1 "$octo" finetune -m "$emb" -f "$tmp/ft.txt" -o "$tmp/fa.gguf" --lr 0
expect 1 1 "$octo" finetune -m "$emb" -f "$tmp/ft.txt" -o "$tmp/fa.gguf" --targets q,qq
grep -q "unknown target 'qq'" "$tmp/err" && ok || bad "finetune --targets qq: $(cat "$tmp/err")"
expect 2 1 "$octo" finetune -m "$emb" -f "$tmp/ft.txt" -o "$tmp/fa.gguf" --memory-budget lots
expect 1 1 "$octo" finetune -m "$emb" -f "$tmp/ft.txt" -o "$tmp/fa.gguf" --full --type f16
grep -q "written in F32" "$tmp/err" && ok || bad "finetune --full --type: $(cat "$tmp/err")"
ft() { "$octo" finetune -m "$emb" -f "$tmp/ft.txt" --steps 120 --batch 2 --seq-len 48 --rank 4 --checkpoint-every 2 --quiet "$@"; }
expect 0 3 ft -o "$tmp/fa.gguf"
grep -q "training loss" "$tmp/err" && [ -s "$tmp/fa.gguf" ] && [ ! -e "$tmp/fa.gguf.ckpt" ] && ok || bad "finetune: $(cat "$tmp/err")"
ft -o "$tmp/fb.gguf" 2>/dev/null &
pid=$!
i=0
while [ ! -e "$tmp/fb.gguf.ckpt" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
if [ -e "$tmp/fb.gguf" ]; then
    bad "finetune ended before it could be killed: make its run longer"
else
    expect 0 4 ft -o "$tmp/fb.gguf"
    grep -q "^resumed from the checkpoint at step [1-9]" "$tmp/err" && cmp -s "$tmp/fa.gguf" "$tmp/fb.gguf" && ok ||
        bad "finetune killed and resumed: $(cat "$tmp/err"); $(cmp "$tmp/fa.gguf" "$tmp/fb.gguf")"
fi
"$octo" run -m "$emb" --lora "$tmp/fa.gguf" -p "Once upon a time" -n 8 --temp 0 >/dev/null 2>"$tmp/err" && ok ||
    bad "run --lora with finetune's adapter: $(cat "$tmp/err")"

# an upcycled MoE healed by distillation from its dense model: upcycle --measure scores a written MoE as
# upcycle itself did, and the healed one closer to the dense model; finetune reports the experts reached
awk 'BEGIN { split("cat dog bird fish frog", a, " "); for (i = 0; i < 60; i++) { n = a[i % 5 + 1];
    print "Once upon a time there was a little " n ". The " n " liked to play in the park with a red ball. One day the " n " saw a big tree and was happy." } }' >"$tmp/up.txt"
expect 0 3 "$octo" upcycle -m "$emb" -o "$tmp/up.gguf" --experts 4 --experts-used 2 -f "$tmp/up.txt"
grep "^kld:" "$tmp/out" >"$tmp/kld0"
expect 0 0 "$octo" upcycle -m "$emb" --measure "$tmp/up.gguf" -f "$tmp/up.txt"
grep "^kld:" "$tmp/out" | cmp -s - "$tmp/kld0" && [ -s "$tmp/kld0" ] && ok || bad "upcycle --measure: $(cat "$tmp/out") vs $(cat "$tmp/kld0")"
expect 2 1 "$octo" upcycle -m "$emb" --measure "$tmp/up.gguf"
expect 2 1 "$octo" upcycle -m "$emb" --measure "$tmp/up.gguf" -f "$tmp/up.txt" -o "$tmp/x.gguf"
expect 1 1 "$octo" upcycle -m "$emb" --measure "$emb" -f "$tmp/up.txt"
grep -q "is not a mixture of experts" "$tmp/err" && ok || bad "upcycle --measure of a dense model: $(cat "$tmp/err")"
expect 0 4 "$octo" finetune -m "$tmp/up.gguf" --distill "$emb" -f "$tmp/up.txt" -o "$tmp/healed.gguf" --steps 30 --batch 2 \
    --seq-len 48 --lr 3e-3 --quiet
grep -q "^experts: 20 of 20 reached by training tokens" "$tmp/err" && ok || bad "finetune of an MoE: $(cat "$tmp/err")"
expect 0 0 "$octo" upcycle -m "$emb" --measure "$tmp/healed.gguf" -f "$tmp/up.txt"
awk '/^kld:/ { k = $2 } END { exit !(k > 0) }' "$tmp/out" && awk -v before="$(awk '{ print $2 }' "$tmp/kld0")" \
    '/^kld:/ { exit !($2 < before / 2) }' "$tmp/out" && ok || bad "healing: $(grep kld "$tmp/out") from $(cat "$tmp/kld0")"

# federated: two devices' round-1 updates of the upcycled MoE (only the experts their words reached), averaged
# into a global that --lora loads; round 2 from it; the refusals
printf 'the cat and the dog %.0s' $(seq 40) >"$tmp/fl1.txt"; printf 'a red ball in a big tree %.0s' $(seq 40) >"$tmp/fl2.txt"
flt() { "$octo" finetune -m "$tmp/up.gguf" --steps 3 --batch 1 --seq-len 16 --rank 2 --quiet "$@"; }
expect 0 5 flt -f "$tmp/fl1.txt" -o "$tmp/u1.gguf" --fl-round 1 --fl-device one
grep -q "^update: [0-9]* of 80 groups sent" "$tmp/err" && ok || bad "finetune --fl-round: $(cat "$tmp/err")"
expect 0 5 flt -f "$tmp/fl2.txt" -o "$tmp/u2.gguf" --fl-round 1 --fl-device two
expect 0 1 "$octo" fedavg -m "$tmp/up.gguf" -o "$tmp/g1.gguf" "$tmp/u1.gguf" "$tmp/u2.gguf"
grep -q "round 1, the global adapter of 2 updates from 2 devices" "$tmp/err" && ok || bad "fedavg: $(cat "$tmp/err")"
expect 0 0 "$octo" run -m "$tmp/up.gguf" --lora "$tmp/g1.gguf" -p "Once" -n 4 --temp 0
expect 1 1 "$octo" run -m "$tmp/up.gguf" --lora "$tmp/u1.gguf" -p "Once" -n 4
expect 0 5 flt -f "$tmp/fl1.txt" -o "$tmp/r2.gguf" --fl-round 2 --from "$tmp/g1.gguf" --fl-device one
expect 0 1 "$octo" fedavg -m "$tmp/up.gguf" --from "$tmp/g1.gguf" -o "$tmp/g2.gguf" "$tmp/r2.gguf"
expect 1 1 "$octo" fedavg -m "$tmp/up.gguf" -o "$tmp/g2x.gguf" "$tmp/r2.gguf"
grep -q "round 2: give the global of round 1" "$tmp/err" && [ ! -e "$tmp/g2x.gguf" ] && ok || bad "fedavg without --from: $(cat "$tmp/err")"
expect 1 1 "$octo" fedavg -m "$tmp/up.gguf" -o "$tmp/g2x.gguf" "$tmp/u1.gguf" "$tmp/u1.gguf"
grep -q "device 'one' sent both" "$tmp/err" && [ ! -e "$tmp/g2x.gguf" ] && ok || bad "fedavg twice: $(cat "$tmp/err")"
expect 2 1 "$octo" fedavg -m "$tmp/up.gguf" -o "$tmp/g2x.gguf"
expect 1 1 flt -f "$tmp/fl1.txt" -o "$tmp/r3.gguf" --fl-round 2
expect 1 1 flt -f "$tmp/fl1.txt" -o "$tmp/r3.gguf" --from "$tmp/g1.gguf"
expect 0 6 flt -f "$tmp/fl1.txt" -o "$tmp/dp.gguf" --fl-round 1 --fl-clip 0.01 --fl-noise 1
grep -q "^update: 80 of 80 groups sent" "$tmp/err" && grep -q "(epsilon 10, delta 1e-05) this round" "$tmp/err" && ok ||
    bad "finetune --fl-noise: $(cat "$tmp/err")"
expect 1 1 flt -f "$tmp/fl1.txt" -o "$tmp/dp.gguf" --fl-round 1 --fl-noise 1
expect 1 1 flt -f "$tmp/fl1.txt" -o "$tmp/dp.gguf" --fl-clip 1
expect 1 1 flt -f "$tmp/fl1.txt" -o "$tmp/dp.gguf" --fl-round 1 --type f16
grep -q "its values F32: no adapter type" "$tmp/err" && ok || bad "finetune --fl-round --type: $(cat "$tmp/err")"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
