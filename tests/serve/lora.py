"""`octo serve` with LoRA adapters, as llama-server has them (Python's standard library only).

    python3 lora.py OCTO SCRATCH

Two seeded random adapters for stories260K (`octo synth --lora-for`); `octo run --temp 0` gives
the expected texts: the base, each adapter alone, both stacked; with --spec ngram the same text
(speculation stays lossless with adapters on). Then `octo serve --parallel 2 --lora A
--lora-scaled B 0`: GET /lora-adapters lists both; a plain request runs A; two requests at once
with their own "lora" (B alone, none) each get their own adapter's text, batched in one pass;
POST /lora-adapters changes what a plain request runs; a wrong id, a body that is not a list and
a wrong method are refused, the server still serving after each. Exit 77 (skipped) when octo was
built without the server's libraries.
"""
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

OCTO, SCRATCH = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "..", "models", "stories260K.gguf")
PROMPT, N = "Once upon a time", 40
failed = []


def check(cond, what):
    if not cond:
        failed.append(what)
        print("FAIL:", what, file=sys.stderr)


def run(*args):
    out = subprocess.run([OCTO, "run", "-m", MODEL, "-p", PROMPT, "-n", str(N), "--temp", "0", *args],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout[:-1] if out.stdout.endswith("\n") else out.stdout


def call(url, path, body=None, method=None):
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    req = urllib.request.Request(url + path, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def complete(url, lora=None):
    body = {"prompt": PROMPT, "max_tokens": N, "temperature": 0}
    if lora is not None:
        body["lora"] = lora
    status, reply = call(url, "/v1/completions", body)
    return reply["choices"][0]["text"] if status == 200 else f"HTTP {status}: {reply}"


def main():
    tmp = os.path.join(SCRATCH, f"lora-{os.getpid()}")
    os.makedirs(tmp, exist_ok=True)
    a, b = os.path.join(tmp, "a.gguf"), os.path.join(tmp, "b.gguf")
    for path, seed in ((a, 1), (b, 2)):
        subprocess.run([OCTO, "synth", "--lora-for", MODEL, "--rank", "8", "--std", "0.3", "--seed", str(seed),
                        "-o", path], check=True, timeout=60)
    base, ta, tb = run(), run("--lora", a), run("--lora", b)
    both = run("--lora", a, "--lora-scaled", b, "0.5")
    check(len({base, ta, tb, both}) == 4, f"the adapters change the text: {[base, ta, tb, both]}")
    check(run("--lora", a, "--spec", "ngram") == ta, "speculation with an adapter gives plain decoding's text")
    check(run("--lora-scaled", a, "0") == base, "scale 0 gives the base's text")

    log = open(os.path.join(tmp, "log"), "w+")
    srv = subprocess.Popen([OCTO, "serve", "-m", MODEL, "--port", "0", "--parallel", "2", "--lora", a,
                            "--lora-scaled", b, "0"], stdout=log, stderr=subprocess.STDOUT)
    try:
        url = None
        for _ in range(100):
            log.seek(0)
            text = log.read()
            if "built without" in text:
                print("skipped:", text)
                sys.exit(77)
            found = re.search(r" on (http://[0-9.:]+) ", text)
            if found:
                url = found.group(1)
                break
            time.sleep(0.1)
        assert url, "the server did not start"
        status, listed = call(url, "/lora-adapters")
        check(status == 200 and [e["id"] for e in listed] == [0, 1] and listed[0]["path"] == a
              and listed[0]["scale"] == 1 and listed[1]["scale"] == 0, f"GET /lora-adapters: {listed}")
        check(complete(url) == ta, "a plain request runs the server's adapters")
        got = {}
        threads = [threading.Thread(target=lambda k, l: got.__setitem__(k, complete(url, l)), args=(k, l))
                   for k, l in (("b", [{"id": 1, "scale": 1}]), ("none", []), ("both", [{"id": 0, "scale": 1},
                                                                                        {"id": 1, "scale": 0.5}]))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        check(got.get("b") == tb, f"a request's own adapter beside others: {got.get('b')!r}")
        check(got.get("none") == base, f"a request with none beside others: {got.get('none')!r}")
        check(got.get("both") == both, f"a request stacking both: {got.get('both')!r}")
        status, reply = call(url, "/lora-adapters", [{"id": 1, "scale": 1}])
        check(status == 200 and reply == {"success": True}, f"POST /lora-adapters: {status} {reply}")
        check(complete(url) == tb, "after POST /lora-adapters a plain request runs B alone")
        status, reply = call(url, "/v1/completions", {"prompt": PROMPT, "lora": [{"id": 2, "scale": 1}]})
        check(status == 400 and "no adapter has id 2" in reply["error"]["message"], f"a wrong id: {status} {reply}")
        status, reply = call(url, "/lora-adapters", {"id": 0})
        check(status == 400, f"a body that is not a list: {status} {reply}")
        status, reply = call(url, "/lora-adapters", b"[]", method="PUT")
        check(status == 405, f"PUT /lora-adapters: {status}")
        check(complete(url, []) == base, "the server still serves")
    finally:
        srv.terminate()
        srv.wait(timeout=30)
    print(f"serve lora: {len(failed)} failed")
    sys.exit(1 if failed else 0)


main()
