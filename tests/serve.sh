#!/bin/sh
# serve.sh OCTO SCRATCH [SHARED_DIR] [npm] — `octo serve` with real clients on loopback:
#   curl: health, models, the API key, a completion equal to `octo run`'s text, a malformed
#   body (400), a wrong key (401), a 10 MB body (413), the server still serving after each;
#   Python's standard library (tests/serve/client.py): streaming, chat, a client hanging up
#   mid-stream, two requests queued on one slot, fresh seeds, strict parsing (405, 401, 400);
#   the API key from --api-key-file and from $OCTO_API_KEY;
#   with "npm" as the fourth argument instead: the official `openai` npm package
#   (tests/serve/openai.mjs), installed from the npm registry into SCRATCH; exit 77
#   (reported skipped, never passed) where it cannot be installed;
#   with "page": the chat page at / in Debian's headless Chromium driven by playwright-core
#   (tests/serve/page.mjs), skipped the same way without them.
# Exit 77 (skipped) when octo was built without the server's libraries.
set -u
octo=$1
mkdir -p "$2/serve-$$" || exit 1
tmp=$(cd "$2/serve-$$" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
shared=${3:-}
part=${4:-core}
failed=0
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
# stories260K: ../shared's, else the copy the repository carries (a fresh clone has no ../shared)
model=$shared/models/stories260K.gguf
[ -n "$shared" ] && [ -f "$model" ] || model=$here/../models/stories260K.gguf
[ -f "$model" ] || { echo "FAIL: no models/stories260K.gguf in the repository" >&2; exit 1; }
"$octo" serve -m "$model" --port 0 --parallel 1 --api-key sekret --max-body 1000000 >"$tmp/log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for i in $(seq 50); do grep -q "on http://" "$tmp/log" && break; sleep 0.1; done
if grep -q "built without" "$tmp/log"; then echo "skipped: $(cat "$tmp/log")"; exit 77; fi
url=$(sed -n 's/.* on \(http:\/\/[0-9.:]*\) .*/\1/p' "$tmp/log")
[ -n "$url" ] || { echo "FAIL: the server did not start: $(cat "$tmp/log")" >&2; exit 1; }
auth="Authorization: Bearer sekret"
"$octo" run -m "$model" -p "Once upon a time" -n 24 --temp 0 >"$tmp/expected" 2>/dev/null

code() { curl -s -o "$tmp/body" -w "%{http_code}" "$@"; }
# npm from its cache where it has the package, else the registry; offline, it gives up in seconds, not
# after its default retries (a fresh clone's test command without a network: CI runs one)
npm_get() { (cd "$tmp" && timeout 180 npm install --silent --no-audit --no-fund --prefer-offline --fetch-retries=1 \
    --fetch-retry-mintimeout=1000 --fetch-retry-maxtimeout=3000 --fetch-timeout=20000 "$1" >/dev/null 2>&1); }
if [ "$part" = npm ]; then
    if ! command -v node >/dev/null || ! command -v npm >/dev/null ||
       ! npm_get openai; then
        echo "skipped: npm could not install the openai package"
        exit 77
    fi
    cp "$here/serve/openai.mjs" "$tmp/" && node "$tmp/openai.mjs" "$url" sekret "$tmp/expected" || bad "openai npm client"
elif [ "$part" = page ]; then
    chrome=$(command -v chromium || command -v chromium-browser || true)
    if [ -z "$chrome" ] || ! command -v npm >/dev/null ||
       ! npm_get playwright-core; then
        echo "skipped: no chromium (scripts/setup.sh) or npm could not install playwright-core"
        exit 77
    fi
    cp "$here/serve/page.mjs" "$tmp/" && timeout 120 node "$tmp/page.mjs" "$url" sekret "$chrome" || bad "the chat page in chromium"
else
    [ "$(code "$url/health")" = 200 ] && grep -q '"ok"' "$tmp/body" || bad "health: $(cat "$tmp/body")"
    [ "$(code "$url/v1/models")" = 401 ] && grep -q '"invalid_api_key"' "$tmp/body" || bad "models without a key"
    [ "$(code -H "$auth" "$url/v1/models")" = 200 ] && grep -q '"object":"list"' "$tmp/body" || bad "models: $(cat "$tmp/body")"
    [ "$(code -H "$auth" "$url/v1/completions" -d '{"prompt":"Once upon a time","max_tokens":24,"temperature":0}')" = 200 ] ||
        bad "completion: $(cat "$tmp/body")"
    python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["choices"][0]["text"]; e=open(sys.argv[2]).read()[:-1]; assert t == e, (t, e)' \
        "$tmp/body" "$tmp/expected" || bad "curl's completion differs from octo run's"
    # the octo object: its keys in order (the serve column of OCTO_STATS, octo.h, then messages_dropped, queue_length)
    keys=$(python3 -c 'import json,sys; print(" ".join(json.load(open(sys.argv[1]))["octo"]))' "$tmp/body")
    [ "$keys" = "prefill_tokens_per_s decode_tokens_per_s time_to_first_token_ms spec_proposer spec_acceptance_rate kv_bytes kv_budget_bytes kv_tokens_evicted context_tokens mem_level mem_trims mem_pressure_events decode_latency_p50_ms decode_latency_p90_ms decode_latency_p95_ms decode_latency_p99_ms decode_latency_max_ms decode_latency_cv cpu_threads cpu_effective batch_steps batch_mean messages_dropped queue_length" ] ||
        bad "the octo object's keys: $keys"
    [ "$(code -H "$auth" "$url/v1/completions" -d '{"prompt": ')" = 400 ] && grep -q '"message"' "$tmp/body" || bad "malformed body"
    [ "$(code -H "Authorization: Bearer nope" "$url/v1/completions" -d '{}')" = 401 ] || bad "wrong key"
    head -c 10000000 /dev/zero | tr '\0' 'a' >"$tmp/big"
    [ "$(code -H "$auth" "$url/v1/completions" --data-binary @"$tmp/big")" = 413 ] && grep -q "max-body" "$tmp/body" || bad "10 MB body"
    [ "$(code "$url/health")" = 200 ] || bad "not serving after the errors"

    python3 "$here/serve/client.py" "$url" sekret "$tmp/expected" || bad "python client"

    # the key kept out of the process list: from a file (its newline dropped) or the environment
    printf 'filekey\n' >"$tmp/key"
    for how in file env; do
        if [ $how = file ]; then "$octo" serve -m "$model" --port 0 --api-key-file "$tmp/key" >"$tmp/log2" 2>&1 &
        else OCTO_API_KEY=envkey "$octo" serve -m "$model" --port 0 >"$tmp/log2" 2>&1 & fi
        pid2=$!
        for i in $(seq 50); do grep -q "on http://" "$tmp/log2" && break; sleep 0.1; done
        url2=$(sed -n 's/.* on \(http:\/\/[0-9.:]*\) .*/\1/p' "$tmp/log2")
        key=filekey; [ $how = env ] && key=envkey
        [ "$(code -H "Authorization: Bearer $key" "$url2/v1/models")" = 200 ] || bad "the key from the $how: $(cat "$tmp/log2")"
        [ "$(code -H "Authorization: Bearer sekret" "$url2/v1/models")" = 401 ] || bad "a wrong key with the key from the $how"
        kill $pid2; wait $pid2
    done
    # every address without a key: said on stderr (the loopback default and a keyed server say nothing)
    "$octo" serve -m "$model" --port 0 --host 0.0.0.0 >"$tmp/log5" 2>&1 &
    pid5=$!
    for i in $(seq 50); do grep -q "on http://" "$tmp/log5" && break; sleep 0.1; done
    grep -q "^octo: note: serve: listening on 0.0.0.0 without an API key" "$tmp/log5" || bad "no warning for 0.0.0.0: $(cat "$tmp/log5")"
    kill $pid5; wait $pid5
    grep -q "without an API key" "$tmp/log" "$tmp/log2" && bad "a warning on loopback or with a key"
    timeout 10 "$octo" serve -m "$model" --port 0 --api-key a --api-key-file "$tmp/key" 2>/dev/null; [ $? = 2 ] || bad "--api-key with --api-key-file"
    printf '\n' >"$tmp/key"
    timeout 10 "$octo" serve -m "$model" --port 0 --api-key-file "$tmp/key" 2>/dev/null; [ $? = 2 ] || bad "an empty key file"

    # a generation that fails (NaN steps in the last Q4_0 blocks: the file's last tensor, blk.1.ffn_down,
    # ends the file) is a 500 with the library's message, streamed or not, never a 200 with its text
    "$octo" synth -o "$tmp/nan.gguf" --type q4_0 --vocab 300 --embd 64 --layers 2 --heads 4 --kv-heads 2 --ff 96 >/dev/null
    size=$(wc -c <"$tmp/nan.gguf")
    for b in 1 2 3 4; do printf '\000\176' | dd of="$tmp/nan.gguf" bs=1 seek=$((size - 18 * b)) conv=notrunc 2>/dev/null; done
    OCTO_CPU=scalar "$octo" run -m "$tmp/nan.gguf" -p ab -n 4 2>&1 >/dev/null | grep -q non-finite || bad "the NaN model runs"
    "$octo" serve -m "$tmp/nan.gguf" --port 0 >"$tmp/log3" 2>&1 &
    pid3=$!
    for i in $(seq 50); do grep -q "on http://" "$tmp/log3" && break; sleep 0.1; done
    url3=$(sed -n 's/.* on \(http:\/\/[0-9.:]*\) .*/\1/p' "$tmp/log3")
    [ "$(code "$url3/v1/completions" -d '{"prompt":"ab","max_tokens":4}')" = 500 ] && grep -q non-finite "$tmp/body" ||
        bad "a failed generation: $(cat "$tmp/body")"
    code "$url3/v1/completions" -d '{"prompt":"ab","max_tokens":4,"stream":true}' >/dev/null
    grep -q '"error".*non-finite' "$tmp/body" && ok=1 || bad "a failed stream: $(cat "$tmp/body")"
    kill $pid3; wait $pid3

    # a model whose greedy text is not UTF-8 (the synthetic vocabulary's byte tokens): the JSON stays strictly
    # valid UTF-8, whole and streamed, each byte that starts no character sent as U+FFFD
    "$octo" synth -o "$tmp/bytes.gguf" --vocab 300 --embd 64 --layers 2 --heads 4 --kv-heads 2 --ff 96 >/dev/null
    "$octo" run -m "$tmp/bytes.gguf" -p "Once upon a time" -n 48 --temp 0 >"$tmp/raw" 2>/dev/null
    python3 -c 'import sys; open(sys.argv[1], "rb").read().decode("utf-8")' "$tmp/raw" 2>/dev/null &&
        bad "the synthetic model's text is valid UTF-8: this check would prove nothing"
    "$octo" serve -m "$tmp/bytes.gguf" --port 0 >"$tmp/log4" 2>&1 &
    pid4=$!
    for i in $(seq 50); do grep -q "on http://" "$tmp/log4" && break; sleep 0.1; done
    url4=$(sed -n 's/.* on \(http:\/\/[0-9.:]*\) .*/\1/p' "$tmp/log4")
    for stream in false true; do
        [ "$(code "$url4/v1/completions" -d "{\"prompt\":\"Once upon a time\",\"max_tokens\":48,\"temperature\":0,\"stream\":$stream}")" = 200 ] &&
            python3 -c 'import json, sys
body = open(sys.argv[1], "rb").read().decode("utf-8")  # strict: raises on any invalid byte
docs = [l[6:] for l in body.splitlines() if l.startswith("data: ") and l != "data: [DONE]"] if sys.argv[2] == "true" else [body]
text = "".join(json.loads(d)["choices"][0]["text"] for d in docs)
assert "\ufffd" in text, text' "$tmp/body" "$stream" || bad "the synthetic model's text as JSON, stream $stream: $(head -c 300 "$tmp/body")"
    done
    kill $pid4; wait $pid4

    # SIGINT while a long stream runs: the stream ends as any other (a final chunk, then [DONE]), then
    # the server exits 0
    "$octo" serve -m "$model" --port 0 -c 16384 >"$tmp/log6" 2>&1 &
    pid6=$!
    for i in $(seq 50); do grep -q "on http://" "$tmp/log6" && break; sleep 0.1; done
    url6=$(sed -n 's/.* on \(http:\/\/[0-9.:]*\) .*/\1/p' "$tmp/log6")
    python3 - "$url6" "$pid6" <<'PY' || bad "a stream cut by SIGINT: $(cat "$tmp/log6")"
import json, os, signal, sys, urllib.request
req = urllib.request.Request(sys.argv[1] + "/v1/completions", headers={"Content-Type": "application/json"},
                             data=json.dumps({"prompt": "Once", "max_tokens": 16000, "stream": True}).encode())
lines, sent = [], False
with urllib.request.urlopen(req, timeout=60) as r:
    for raw in r:
        if raw.strip():
            lines.append(raw.decode().strip())
        if len(lines) == 3 and not sent:  # once: the blank line after an event must not send a second
            os.kill(int(sys.argv[2]), signal.SIGINT)
            sent = True
assert lines[-1] == "data: [DONE]" and len(lines) < 16000, lines[-3:]
json.loads(lines[-2][6:])  # the final chunk, whole
PY
    wait $pid6 || bad "serve after SIGINT exited $?"
fi
kill -0 $pid 2>/dev/null || bad "the server died"
[ "$failed" -eq 0 ] && echo "serve: all passed" || echo "serve: $failed failed"
[ "$failed" -eq 0 ]
