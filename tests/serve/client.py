"""A client of `octo serve` with Python's standard library only (tests/serve.sh runs it).

    python3 client.py URL KEY EXPECTED_TEXT_FILE

Checks: a streamed completion (server-sent events read with urllib) whose text equals EXPECTED;
a non-streamed chat; a client that hangs up mid-stream, after which the server (one slot) still
answers; two requests at once on one slot, both answered (the second queued); error objects;
unseeded requests in the same second sampling different texts; strict parsing (whole integers,
nothing after the JSON, no \u0000, the whole key, 405 for a wrong method, the JSON limits).
"""
import http.client
import json
import re
import sys
import threading
import time
import urllib.error
import urllib.request
from urllib.parse import urlparse

URL, KEY, EXPECTED = sys.argv[1], sys.argv[2], open(sys.argv[3]).read()
if EXPECTED.endswith("\n"):
    EXPECTED = EXPECTED[:-1]  # octo run ends its text with a newline


def post(path, body, key=KEY, raw=None):
    req = urllib.request.Request(URL + path, data=raw if raw is not None else json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=60)


def stream_text(body):
    text, chunks, last = "", 0, None
    with post("/v1/completions", dict(body, stream=True)) as r:
        assert r.headers["Content-Type"] == "text/event-stream"
        for line in r:
            line = line.decode().strip()
            if not line:
                continue
            assert line.startswith("data: "), line
            if line == "data: [DONE]":
                break
            ev = json.loads(line[6:])
            text += ev["choices"][0]["text"]
            chunks += 1
            last = ev
    return text, chunks, last


def raw(method, path, body=None, auth=b"Bearer " + KEY.encode()):
    """(status, headers, parsed JSON) of a request sent as given (http.client leaves NUL bytes alone)."""
    u = urlparse(URL)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    c.putrequest(method, path)
    if auth is not None:
        c.putheader("Authorization", auth)
    data = body if isinstance(body, bytes) else json.dumps(body).encode() if body is not None else b""
    c.putheader("Content-Length", str(len(data)))
    c.endheaders(data)
    r = c.getresponse()
    out = r.status, dict(r.getheaders()), json.loads(r.read())
    c.close()
    return out


def seeds():
    """Without a seed each request draws a new one, even six within a second (finding 6)."""
    body = {"prompt": "Once upon a time", "max_tokens": 32, "temperature": 1}
    t0 = time.monotonic()
    texts = [raw("POST", "/v1/completions", body)[2]["choices"][0]["text"] for _ in range(6)]
    assert time.monotonic() - t0 < 1.5, "too slow to test requests within one second"
    assert len(set(texts)) == 6, texts
    seeded = [raw("POST", "/v1/completions", dict(body, seed=7))[2]["choices"][0]["text"] for _ in range(2)]
    assert seeded[0] == seeded[1], seeded


def strict():
    """What the parser once let through (finding 13), and what it must still take."""
    ok = {"prompt": "Once", "max_tokens": 2}
    good = json.dumps(ok).encode()
    cases = [("POST", "/v1/completions", dict(ok, max_tokens=1.5), None, 400),
             ("POST", "/v1/completions", dict(ok, seed=2.5), None, 400),
             ("POST", "/v1/completions", dict(ok, max_tokens=2.0), None, 200),  # a whole number, written 2.0
             ("POST", "/v1/completions", good + b" junk", None, 400),
             ("POST", "/v1/completions", good + b"{}", None, 400),
             ("POST", "/v1/completions", good + b" \r\n\t ", None, 200),
             ("POST", "/v1/completions", dict(ok, prompt="Once\u0000 upon"), None, 400),
             ("POST", "/v1/completions", dict(ok, stop=["a", "\u0000"]), None, 400),
             ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "a\u0000b"}]}, None, 400),
             ("POST", "/v1/completions", good.replace(b'"Once"', b'"On\\\\u0000ce"'), None, 200),  # a backslash, then u0000
             ("POST", "/v1/completions", ok, b"Bearer " + KEY.encode()[:-1], 401),
             ("POST", "/v1/completions", ok, b"Bearer " + KEY.encode() + b"x", 401),
             ("GET", "/v1/completions", None, None, 405),
             ("PUT", "/v1/chat/completions", ok, None, 405),
             ("DELETE", "/v1/models", None, None, 405),
             ("POST", "/v1/models", ok, None, 405),
             ("GET", "/v1/nothing", None, None, 404),
             # past the defaults of --max-json-nodes (65,536 values) and --max-json-depth (64), and within
             # (the padding in "user", which octo accepts and does not read)
             ("POST", "/v1/completions", dict(ok, user=[0] * 65536), None, 400),
             ("POST", "/v1/completions", dict(ok, user=[0] * 65000), None, 200),
             ("POST", "/v1/completions", good[:-1] + b',"user":' + b"[" * 64 + b"]" * 64 + b"}", None, 400),
             ("POST", "/v1/completions", good[:-1] + b',"user":' + b"[" * 63 + b"]" * 63 + b"}", None, 200),
             # a field octo does not support is named, never ignored
             ("POST", "/v1/completions", dict(ok, logit_bias={"5": 3}), None, 400),
             ("POST", "/v1/completions", dict(ok, functions=[]), None, 400),
             # the message names the field cut at 60 bytes, here inside a character: still strict UTF-8
             ("POST", "/v1/completions", dict(ok, **{"a" + "\u00e9" * 40: 1}), None, 400),
             ("POST", "/v1/completions", dict(ok, top_k=1.5), None, 400),
             ("POST", "/v1/completions", dict(ok, min_p=2), None, 400),
             ("POST", "/v1/completions", dict(ok, repeat_penalty=0), None, 400),
             ("POST", "/v1/completions", dict(ok, grammar=5), None, 400),
             ("POST", "/v1/completions", dict(ok, grammar='root ::= ("a"'), None, 400),
             ("POST", "/v1/completions", dict(ok, logprobs=21), None, 400),
             ("POST", "/v1/completions", dict(ok, store="yes"), None, 400),
             ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "grammar": 'root ::= "a"',
                                               "response_format": {"type": "json_object"}}, None, 400),
             ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
              None, 400)]
    for method, path, body, auth, status in cases:
        got, headers, d = raw(method, path, body, **({"auth": auth} if auth is not None else {}))
        assert got == status, (method, path, body if not isinstance(body, dict) or "user" not in body else "pad",
                               auth, got, d)
        assert ("error" in d) == (status != 200), d
        if status == 405:
            assert headers.get("Allow") == ("GET" if path == "/v1/models" else "POST"), headers


def tools_with_refs():
    """A tool whose parameters hold their own $defs (as Pydantic writes nested models): its refs resolve
    in the tool's schema. A call named with a quote goes back into the prompt escaped, and 80 messages
    made into text (content parts, calls, results) are one request (the oldest dropped to fit)."""
    # small: the tools' system message and the call share stories260K's 512-token context
    params = {"type": "object", "properties": {"w": {"$ref": "#/$defs/P"}}, "required": ["w"],
              "$defs": {"P": {"type": "object", "properties": {"z": {"type": "string", "pattern": "^\\d{3}$"}},
                              "required": ["z"]}}}
    body = {"messages": [{"role": "user", "content": "Where?"}], "max_tokens": 150, "temperature": 0,
            "tools": [{"type": "function", "function": {"name": "f", "parameters": params}}], "tool_choice": "required"}
    with post("/v1/chat/completions", body) as r:
        d = json.load(r)
    call = d["choices"][0]["message"]["tool_calls"][0]["function"]
    args = json.loads(call["arguments"])
    assert call["name"] == "f" and re.fullmatch(r"\d{3}", args["w"]["z"]), d
    msgs = []
    for i in range(40):
        msgs += [{"role": "assistant", "content": [{"type": "text", "text": "a"}], "tool_calls": [{"id": f"c{i}",
                  "type": "function", "function": {"name": 'say "hi"', "arguments": "{}"}}]},
                 {"role": "tool", "tool_call_id": f"c{i}", "content": [{"type": "text", "text": "ok"}]}]
    with post("/v1/chat/completions", {"messages": msgs + [{"role": "user", "content": "Go on"}], "max_tokens": 4}) as r:
        assert json.load(r)["choices"][0]["finish_reason"] in ("stop", "length")


def drop_in():
    """What llama-server's and OpenAI's clients also send: honoured where octo can, accepted where it
    changes nothing, refused (in strict()) where octo cannot honour it."""
    base = {"prompt": "Once upon a time", "max_tokens": 24}
    # top_k 1 and min_p 1 keep only the likeliest token: at temperature 1, any seed, the greedy text
    for extra in ({"top_k": 1, "seed": 1}, {"top_k": 1, "seed": 2}, {"min_p": 1, "seed": 3}):
        with post("/v1/completions", dict(base, temperature=1, **extra)) as r:
            t = json.load(r)["choices"][0]["text"]
        assert t == EXPECTED, (extra, t)
    with post("/v1/completions", dict(base, temperature=0, repeat_penalty=1.0)) as r:
        assert json.load(r)["choices"][0]["text"] == EXPECTED
    # a GBNF grammar shapes sampled text
    for seed in (4, 5, 6):
        with post("/v1/completions", dict(base, temperature=1.5, seed=seed,
                                          grammar='root ::= ("yes" | "no") " " ("cat" | "dog")')) as r:
            t = json.load(r)["choices"][0]["text"]
        assert re.fullmatch(r"(yes|no) (cat|dog)", t), t
    # everything a llama-server or OpenAI client may add, on a chat with a developer message
    body = {"messages": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
            "max_tokens": 8, "temperature": 0, "top_k": 40, "min_p": 0.05, "repeat_penalty": 1.1, "logit_bias": {},
            "store": False, "metadata": {"app": "test"}, "service_tier": "auto", "reasoning_effort": "low", "user": "u"}
    with post("/v1/chat/completions", body) as r:
        d = json.load(r)
    assert d["choices"][0]["message"]["role"] == "assistant" and d["usage"]["prompt_tokens"] > 0, d
    # logprobs on /v1/completions: the completions API's arrays, whole and streamed
    with post("/v1/completions", dict(base, temperature=0, logprobs=2)) as r:
        d = json.load(r)
    lp, n = d["choices"][0]["logprobs"], d["usage"]["completion_tokens"]
    assert n == 24 and all(len(lp[k]) == n for k in ("tokens", "token_logprobs", "top_logprobs", "text_offset")), lp
    assert "".join(lp["tokens"]) == d["choices"][0]["text"] == EXPECTED, lp["tokens"]
    for i in range(n):
        top = lp["top_logprobs"][i]
        assert 1 <= len(top) <= 2 and lp["token_logprobs"][i] <= 0, top
        assert abs(lp["token_logprobs"][i] - max(top.values())) < 1e-6, (i, lp["token_logprobs"][i], top)  # greedy
        assert lp["text_offset"][i] == len("".join(lp["tokens"][:i]).encode()), lp["text_offset"]
    streamed = []
    with post("/v1/completions", dict(base, temperature=0, logprobs=0, stream=True)) as r:
        for line in r:
            line = line.decode().strip()
            if line.startswith("data: {"):
                c = json.loads(line[6:])["choices"][0]
                if c.get("logprobs"):
                    streamed += c["logprobs"]["tokens"]
                    assert all(t == {} for t in c["logprobs"]["top_logprobs"])
    assert streamed == lp["tokens"], (streamed, lp["tokens"])
    # a chat stream's first chunk names the role, as OpenAI's does; no later one repeats it
    roles = []
    with post("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 6,
                                        "temperature": 0, "stream": True}) as r:
        for line in r:
            line = line.decode().strip()
            if line.startswith("data: {"):
                roles.append(json.loads(line[6:])["choices"][0]["delta"].get("role"))
    assert len(roles) >= 2 and roles[0] == "assistant" and not any(roles[1:]), roles


def main():
    text, chunks, last = stream_text({"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0})
    assert text == EXPECTED, (text, EXPECTED)
    assert chunks > 2 and last["choices"][0]["finish_reason"] in ("length", "stop")
    assert last["usage"]["completion_tokens"] == 24 and "decode_tokens_per_s" in last["octo"], last
    with post("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8,
                                        "temperature": 0}) as r:
        d = json.load(r)
    assert d["object"] == "chat.completion" and d["choices"][0]["message"]["role"] == "assistant", d
    # a conversation longer than the context keeps going: its oldest messages are dropped
    long = [{"role": "user" if i % 2 == 0 else "assistant",
             "content": "Once upon a time there was a little girl named Lily who loved to play in the park"}
            for i in range(41)]
    with post("/v1/chat/completions", {"messages": long, "max_tokens": 8, "temperature": 0}) as r:
        d = json.load(r)
    assert d["octo"]["messages_dropped"] > 0 and d["choices"][0]["message"]["content"], d["octo"]
    # a client that hangs up mid-stream: the server cancels it and frees the slot
    u = urlparse(URL)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    c.request("POST", "/v1/completions", json.dumps({"prompt": "Once", "max_tokens": 400, "stream": True}),
              {"Authorization": f"Bearer {KEY}"})
    resp = c.getresponse()
    resp.read(200)
    c.close()
    text, _, _ = stream_text({"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0})
    assert text == EXPECTED
    # two at once on one slot: the second waits, both complete
    out = [None, None]

    def one(i):
        out[i] = stream_text({"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0})[0]

    ts = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert out == [EXPECTED, EXPECTED], out
    # errors: the status and an OpenAI-style error object
    for path, body, key, raw, status in [("/v1/completions", None, KEY, b"{not json", 400),
                                         ("/v1/completions", {"prompt": "x", "temperature": 5}, KEY, None, 400),
                                         ("/v1/completions", {"prompt": "x", "prompt_compress": 2}, KEY, None, 400),
                                         # the server's model has no draft to compress with
                                         ("/v1/completions", {"prompt": "x y z", "prompt_compress": 0.5}, KEY, None, 400),
                                         ("/v1/models", None, "wrong", None, 401)]:
        try:
            if body is None and raw is None:
                urllib.request.urlopen(urllib.request.Request(URL + path, headers={"Authorization": f"Bearer {key}"}))
            else:
                post(path, body, key, raw)
            raise AssertionError(f"{path} answered 200")
        except urllib.error.HTTPError as e:
            assert e.code == status, (path, e.code)
            assert "message" in json.load(e)["error"]
    seeds()
    strict()
    tools_with_refs()
    drop_in()
    print("client.py: all passed")


main()
