"""The Python binding against the library built beside it (tests/python.sh runs this with
OCTO_LIBRARY, OCTO_BIN, OCTO_TEST_DATA and OCTO_HEADER set)."""
import ctypes
import gc
import os
import sys
import re
import subprocess
import threading
import time

import pytest

import octo
from octo import _lib

PROMPT = "Once upon a time"


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    data = os.environ.get("OCTO_TEST_DATA", "")
    path = os.path.join(data, "models", "stories260K.gguf")
    if data and os.path.exists(path):
        return path
    out = str(tmp_path_factory.mktemp("m") / "synth.gguf")  # no data folder: a synthetic model
    subprocess.run([os.environ["OCTO_BIN"], "synth", "-o", out], check=True)
    return out


@pytest.fixture(scope="module")
def model(model_path):
    m = octo.Model(model_path)
    yield m
    m.close()


def test_model_without_a_path_is_the_embedded_one(model_path):
    """The wheel carries stories260K (octo/models/): octo.Model() loads it from any folder."""
    assert octo.EMBEDDED_MODEL and octo.EMBEDDED_MODEL.endswith(os.path.join("octo", "models", "stories260K.gguf")), \
        octo.EMBEDDED_MODEL
    with octo.Model() as m, octo.Model(octo.EMBEDDED_MODEL) as n:
        a = "".join(m.generate(PROMPT, max_tokens=16, temperature=0))
        b = "".join(n.generate(PROMPT, max_tokens=16, temperature=0))
    assert a == b and len(a) > 16, (a, b)


def test_misspelt_keyword_is_one_typeerror(model_path):
    """A keyword Model does not take: the TypeError alone, no 'Exception ignored in __del__' after it."""
    seen, hook = [], sys.unraisablehook
    sys.unraisablehook = seen.append
    try:
        with pytest.raises(TypeError):
            octo.Model(model_path, n_ctxx=64)
        gc.collect()
    finally:
        sys.unraisablehook = hook
    assert not seen, seen[0].exc_value


def test_version_and_layout():
    assert octo.version() == octo.__version__
    for struct, name in _lib.STRUCTS:
        assert ctypes.sizeof(struct) == _lib.load().octo_struct_size(name.encode()), name


C_TYPES = {"int": ctypes.c_int, "uint64_t": ctypes.c_uint64, "int64_t": ctypes.c_int64, "double": ctypes.c_double}


def header_stats(path):
    """OCTO_STATS, the list in octo.h: (name, ctypes type) of every statistic, in order."""
    with open(path) as f:
        text = f.read()
    start = text.index("#define OCTO_STATS(NUM, TEXT)")
    block = text[start:text.index("\n\n", start)]
    rows = re.findall(r"\b(NUM|TEXT)\((\w+), (\w+), (\w+),", block)
    assert len(rows) == len(re.findall(r"^ *(NUM|TEXT)\(", block, re.M))  # every line of the list read
    return [(name, C_TYPES[t] if kind == "NUM" else ctypes.c_char * int(t)) for kind, _, t, name in rows]


def test_stats_fields_are_the_headers_list():
    path = os.environ.get("OCTO_HEADER")
    if not path:
        pytest.skip("OCTO_HEADER unset (tests/python.sh sets it)")
    want = header_stats(path)
    assert [name for name, _ in _lib.Stats._fields_] == [name for name, _ in want]
    for (name, got), (_, typ) in zip(_lib.Stats._fields_, want):
        same = got is typ or (issubclass(got, ctypes.Array) and issubclass(typ, ctypes.Array)
                              and (got._type_, got._length_) == (typ._type_, typ._length_))
        assert same, f"{name}: {got} in the binding, {typ} in octo.h"


class FakeLib:
    _name = "libfake.so"

    def __init__(self, ver, delta):
        self.ver, self.delta = ver, delta

    def octo_version(self):
        return self.ver

    def octo_struct_size(self, name):
        struct = dict((n.encode(), s) for s, n in _lib.STRUCTS)[name]
        return ctypes.sizeof(struct) + (self.delta if name == b"octo_stats" else 0)


def test_handshake_refuses_a_mismatched_library():
    _lib.handshake(FakeLib(octo.__version__.encode(), 0))  # the same layout passes
    with pytest.raises(octo.LibraryError, match="octo_stats is .* different builds"):
        _lib.handshake(FakeLib(octo.__version__.encode(), 8))
    with pytest.raises(octo.LibraryError, match="is octo 9.0.0"):
        _lib.handshake(FakeLib(b"9.0.0", 0))


def test_greedy_text_equals_octo_run(model, model_path):
    pieces = list(model.generate(PROMPT, max_tokens=24, temperature=0))
    assert pieces and all(isinstance(p, str) and p for p in pieces)
    cli = subprocess.run([os.environ["OCTO_BIN"], "run", "-m", model_path, "-p", PROMPT, "-n", "24", "--temp", "0"],
                         check=True, capture_output=True).stdout.decode("utf-8", "replace")
    assert "".join(pieces) == cli.removesuffix("\n")  # octo run ends the text with a newline


def test_adapters(model_path, tmp_path):
    """LoRA adapters per conversation: the text of octo run --lora, the base's at scale 0 and with
    none, two sessions with different adapters at once; bad input raises."""
    bin_ = os.environ["OCTO_BIN"]
    paths = [str(tmp_path / f"a{i}.gguf") for i in (1, 2)]
    for i, p in enumerate(paths):
        subprocess.run([bin_, "synth", "--lora-for", model_path, "--rank", "8", "--std", "0.3", "--seed", str(i + 1),
                        "-o", p], check=True)

    def cli(*extra):
        out = subprocess.run([bin_, "run", "-m", model_path, "-p", PROMPT, "-n", "24", "--temp", "0", *extra],
                             check=True, capture_output=True).stdout.decode("utf-8", "replace")
        return out.removesuffix("\n")

    want = [cli("--lora", paths[0]), cli("--lora", paths[1])]
    with octo.Model(model_path, max_sessions=2) as m:
        base = m.generate(PROMPT, max_tokens=24, temperature=0).text()
        a, b = m.load_adapter(paths[0]), m.load_adapter(paths[1])
        assert a.info["n_matrices"] > 0 and a.info["rank_max"] == 8 and a.info["bytes"] > 0
        m.set_adapters([a])
        assert m.generate(PROMPT, max_tokens=24, temperature=0).text() == want[0] != base
        m.set_adapters([a, b], [0.0, 0.0])
        assert m.generate(PROMPT, max_tokens=24, temperature=0).text() == base
        s = m.session()
        m.set_adapters([a])
        s.set_adapters([b])
        out = [None, None]
        ts = [threading.Thread(target=lambda: out.__setitem__(0, m.generate(PROMPT, max_tokens=24, temperature=0).text())),
              threading.Thread(target=lambda: out.__setitem__(1, s.generate(PROMPT, max_tokens=24, temperature=0).text()))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert out == want
        a.close()  # the model's conversation keeps it
        assert m.generate(PROMPT, max_tokens=24, temperature=0).text() == want[0]
        with pytest.raises(TypeError):
            m.set_adapters([a])
        with pytest.raises(ValueError):
            s.set_adapters([b], [1.0, 2.0])
        with pytest.raises(octo.OctoError, match="not an adapter"):
            m.load_adapter(model_path)
        with pytest.raises(octo.OctoError, match="no such file"):
            m.load_adapter(str(tmp_path / "none.gguf"))
        m.set_adapters()
        assert m.generate(PROMPT, max_tokens=24, temperature=0).text() == base
        s.close()
        b.close()


def test_stream_ends_with_a_reason_and_stats(model):
    s = model.generate(PROMPT, max_tokens=16, temperature=0)
    text = s.text()
    assert text and s.stop_reason in ("max_tokens", "end_of_turn")
    st = model.stats()
    assert isinstance(st, octo.Stats) and st.decode_tokens == 16 and st.decode_tokens_per_s > 0
    assert st.kv_policy == "morphkv" and st.context_tokens > 16
    with pytest.raises(Exception):
        st.decode_tokens = 1  # frozen
    info = model.info()
    assert info.arch == "llama" and info.n_vocab > 0 and info.cpu_path


def test_seeds(model):
    a = model.generate(PROMPT, max_tokens=32, temperature=0.8, seed=7).text()
    b = model.generate(PROMPT, max_tokens=32, temperature=0.8, seed=7).text()
    assert a == b
    unseeded = {model.generate(PROMPT, max_tokens=32, temperature=0.8).text() for _ in range(3)}
    assert len(unseeded) > 1  # a random seed each time


def test_chat(model):
    reply = model.chat([{"role": "user", "content": "Tell me a story."}], max_tokens=8, temperature=0).text()
    assert isinstance(reply, str) and reply


def test_cancel_from_another_thread(model):
    s = model.generate(PROMPT, max_tokens=400, temperature=0.8, seed=1)
    first = next(s)
    t = threading.Thread(target=s.cancel)
    t.start()
    t.join()
    rest = list(s)
    assert first and s.stop_reason == "cancelled" and len(rest) < 5


def test_finetune(model_path, tmp_path):
    """octo.finetune trains an adapter that loads; a run stopped from on_progress resumes from its
    checkpoint to the same bytes; an exception in on_progress stops the run and is raised again; every
    weight trained, and distilled from a target, give whole models that load."""
    data = tmp_path / "train.txt"
    data.write_text("Once upon a time there was a little cat. The cat liked to play with a red ball.\n" * 12)
    a, b = str(tmp_path / "a.gguf"), str(tmp_path / "b.gguf")
    kw = dict(steps=6, batch=2, seq_len=32, rank=4, checkpoint_every=2)
    whole = octo.finetune(model_path, data, a, **kw)
    with octo.Model(model_path) as m:
        layers = m.info().n_layer
    assert whole.steps_run == 6 and whole.last_loss < whole.first_loss and whole.n_matrices == 7 * layers
    seen = []
    with pytest.raises(octo.OctoError) as e:
        octo.finetune(model_path, data, b, on_progress=lambda p: seen.append(p.step) or p.step == 4, **kw)
    assert e.value.status == 22 and "resumes" in str(e.value) and seen == [1, 2, 3, 4]
    rest = octo.finetune(model_path, data, b, **kw)
    assert rest.resumed_at == 4 and rest.steps_run == 2
    assert open(a, "rb").read() == open(b, "rb").read()
    with octo.Model(model_path) as m:
        m.load_adapter(a).close()

    def boom(p):
        raise KeyError("from the callback")
    with pytest.raises(KeyError):
        octo.finetune(model_path, data, b, on_progress=boom, restart=True, **kw)
    with pytest.raises(octo.OctoError) as e:
        octo.finetune(model_path, data, a, targets="q,qq", **kw)
    assert e.value.status == 1 and "unknown target" in str(e.value)
    # every weight, then distilled back towards the model: a whole GGUF each time, the KL falls
    full = str(tmp_path / "full.gguf")
    r = octo.finetune(model_path, data, full, full=True, lr=3e-3, **kw)
    assert r.full == 1 and r.n_matrices > 7 * layers and r.activation_bytes > 0
    d = octo.finetune(full, data, b, distill=model_path, valid=data, restart=True, **kw)
    assert d.full == 1 and 0 < d.valid_after < d.valid_before
    with octo.Model(b) as m:
        assert m.info().n_layer == layers


def test_fedavg(model_path, tmp_path):
    """Two devices' round-1 updates (A frozen) average into a global adapter that loads; a round-2 device
    trains from it; an update given twice is refused by its device id and nothing is written."""
    kw = dict(steps=3, batch=1, seq_len=16, rank=2, targets="q,v")
    ups = []
    for i, word in enumerate(["cat", "moon"]):
        data = tmp_path / f"d{i}.txt"
        data.write_text((word + " ") * 50)
        ups.append(str(tmp_path / f"u{i}.gguf"))
        r = octo.finetune(model_path, data, ups[-1], fl_round=1, fl_device=f"dev{i}", **kw)
        assert r.fl_groups == r.fl_groups_sent > 0 and r.fl_bytes == r.fl_dense_bytes > 0
    g = str(tmp_path / "global.gguf")
    res = octo.fedavg(model_path, ups, g)
    assert res.round == 1 and res.devices == 2 and res.groups_sent == res.groups > 0 and res.tokens > 0
    with octo.Model(model_path) as m:
        m.load_adapter(g).close()
    u2 = str(tmp_path / "r2.gguf")
    r = octo.finetune(model_path, tmp_path / "d0.txt", u2, fl_round=2, fl_from=g, fl_device="dev0", **kw)
    assert octo.fedavg(model_path, [u2], str(tmp_path / "g2.gguf"), from_=g).round == 2
    bad = str(tmp_path / "bad.gguf")
    with pytest.raises(octo.OctoError) as e:
        octo.fedavg(model_path, [ups[0], ups[0]], bad)
    assert "sent both" in str(e.value) and not os.path.exists(bad)


def test_errors(model):
    with pytest.raises(octo.OctoError, match="no such file") as e:
        octo.Model("/nonexistent/model.gguf")
    assert e.value.status == 4 and e.value.status_name == "not found"
    with pytest.raises(ValueError, match="kv_policy"):
        octo.Model("/nonexistent/model.gguf", kv_policy="lru")
    with pytest.raises(octo.OctoError, match="draft_threads -1 of 0"):
        octo.Model("/nonexistent/model.gguf", draft_threads=-1)
    s = model.generate(PROMPT, max_tokens=8)
    with pytest.raises(octo.OctoError, match="already serving") as busy:
        model.generate(PROMPT, max_tokens=8)
    assert busy.value.status == 21  # OCTO_ERR_BUSY, octo's own status
    s.close()
    with pytest.raises(octo.OctoError, match="empty") as empty:
        model.generate("")
    assert empty.value.status == 1
    with pytest.raises(octo.OctoError, match="needs a draft model"):  # SpecPC without a draft
        model.generate(PROMPT, max_tokens=8, prompt_compress=0.5)
    assert model.tokenize("Once upon")[0] == 1  # BOS


def test_closed_model(model_path):
    m = octo.Model(model_path)
    m.close()
    with pytest.raises(octo.OctoError, match="closed"):
        m.generate(PROMPT)


def test_sessions_in_threads(model_path):
    with octo.Model(model_path, max_sessions=3) as m:
        alone = [m.generate(p, max_tokens=24, temperature=0).text() for p in ("Once upon a time", "The dog")]
        a, b = m.session(), m.session()
        with pytest.raises(octo.OctoError, match="all 3 sessions"):
            m.session()
        out = [None, None]

        def run(i, s, p):
            out[i] = s.generate(p, max_tokens=24, temperature=0).text()

        ts = [threading.Thread(target=run, args=(0, a, "Once upon a time")),
              threading.Thread(target=run, args=(1, b, "The dog"))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert out == alone
        assert a.stats().decode_tokens == 24
        b.close()
        c = m.session()  # the freed slot
        assert c.generate("Once upon a time", max_tokens=4, temperature=0).text()


def test_integers_outside_their_c_type_are_refused(model, model_path):
    # ctypes would wrap these: 2**32 + 3 tokens became 3, a budget of -1 bytes 2**64 - 1
    for kwargs in ({"max_tokens": 2**32 + 3}, {"max_tokens": 2**31}, {"top_k": -2**31 - 1}, {"seed": -1},
                   {"seed": 2**64}):
        with pytest.raises(octo.OctoError, match="its C type") as e:
            model.generate(PROMPT, **kwargs)
        assert e.value.status == 1, kwargs
    with pytest.raises(octo.OctoError, match="max_tokens must be within -2147483648..2147483647"):
        model.chat([{"role": "user", "content": "hi"}], max_tokens=2**32 + 3)
    for kwargs in ({"kv_budget_bytes": -1}, {"n_ctx": 2**32}, {"max_sessions": 2**32 + 1}, {"n_threads": -2**40}):
        with pytest.raises(octo.OctoError, match="its C type") as e:
            octo.Model(model_path, **kwargs)
        assert e.value.status == 1, kwargs
    assert model.generate(PROMPT, max_tokens=3, temperature=0, seed=2**64 - 1).text()  # the edges pass


def test_floats_must_be_finite(model):
    inf, nan = float("inf"), float("nan")
    for kwargs in ({"temperature": inf}, {"temperature": 1e39}, {"top_p": nan}, {"min_p": -inf},
                   {"prompt_compress": inf}):
        with pytest.raises(octo.OctoError, match="must be a finite number") as e:
            model.generate(PROMPT, max_tokens=2, **kwargs)
        assert e.value.status == 1, kwargs
    with pytest.raises(octo.OctoError, match="temperature must be a finite number"):
        model.chat([{"role": "user", "content": "hi"}], temperature=inf)


def test_text_with_a_nul_is_refused(model, model_path):
    # C would read "Once" of "Once\0 upon a time", and "user" of "user\0x"
    cases = [lambda: model.generate("Once\0 upon a time", max_tokens=2),
             lambda: model.generate(b"Once\0", max_tokens=2),
             lambda: model.chat([{"role": "user", "content": "Tell me\0 a story."}], max_tokens=2),
             lambda: model.chat([{"role": "user\0x", "content": "hi"}], max_tokens=2),
             lambda: model.generate(PROMPT, max_tokens=2, spec="ngram\0"),
             lambda: octo.Model(model_path + "\0.tmp"),
             lambda: octo.Model(model_path, device="host\0"),
             lambda: octo.Model(model_path, kv_policy="window\0x"),
             lambda: octo.Model(model_path, cache_dir="/tmp\0/x")]
    for i, case in enumerate(cases):
        with pytest.raises(octo.OctoError, match="contains a NUL byte") as e:
            case()
        assert e.value.status == 1, i
    assert model.generate(b"Once upon", max_tokens=2, temperature=0).text()  # bytes without a NUL pass


def test_close_ends_with_a_stop_reason(model):
    s = model.generate(PROMPT, max_tokens=64, temperature=0)
    assert next(s) and s.stop_reason == "running"
    s.close()
    assert s.stop_reason == "cancelled" and list(s) == []
    s = model.generate(PROMPT, max_tokens=4, temperature=0)
    s.close()  # before the first piece
    assert s.stop_reason == "cancelled"
    s = model.generate(PROMPT, max_tokens=4, temperature=0)
    s.text()
    s.close()  # after the end: the reason it ended with stays
    assert s.stop_reason == "max_tokens"


def test_chat_fit(model, model_path):
    msgs = [{"role": "system", "content": "You tell stories."}]
    msgs += [{"role": "user" if i % 2 else "assistant", "content": f"Lily had a red ball number {i}."}
             for i in range(1, 400)]
    n = model.chat_fit(msgs)
    assert 0 < n < 398
    model.chat(msgs[:1] + msgs[1 + n:], max_tokens=1).close()  # fits
    ctx = model.info().n_ctx
    with pytest.raises(octo.OctoError, match=f"; the context holds {ctx} "):
        model.chat(msgs[:1] + msgs[n:], max_tokens=1)  # one message fewer dropped does not
    assert model.chat_fit(msgs, reserve_tokens=64) > n and model.chat_fit(msgs[-3:]) == 0
    with pytest.raises(octo.OctoError, match="the last message take") as e:
        model.chat_fit([msgs[0], {"role": "user", "content": "a b " * ctx}])
    assert e.value.status == 20
    with pytest.raises(octo.OctoError, match="its C type"):
        model.chat_fit(msgs, reserve_tokens=2**32)
    with octo.Model(model_path, max_sessions=2) as m:
        assert m.session().chat_fit(msgs) == n


def test_a_dropped_stream_is_freed(model, model_path):
    """Issue 58: the model kept its latest stream, so one the caller dropped was never freed and every
    later generate() raised "already serving a stream" until close()."""
    for piece in model.generate(PROMPT, max_tokens=200, temperature=0):
        break
    assert model.generate(PROMPT, max_tokens=4, temperature=0).text()
    s = model.generate(PROMPT, max_tokens=200, temperature=0)
    next(s)
    del s
    gc.collect()
    assert model.generate(PROMPT, max_tokens=4, temperature=0).text()
    m2 = octo.Model(model_path, max_sessions=2)
    session = m2.session()
    for piece in session.generate(PROMPT, max_tokens=200, temperature=0):
        break
    assert session.generate(PROMPT, max_tokens=4, temperature=0).text()
    m2.close()


def test_close_while_another_thread_iterates(model):
    """Issue 58: close() freed the C stream under a thread inside its next step (a use after free; a
    segfault 5 runs in 5). Now close() cancels, waits for that step, then frees; the iterating thread
    ends cleanly."""
    for round_ in range(20):
        # a grammar that never completes: end-of-generation is never allowed, so only close() ends it
        s = model.generate(PROMPT, max_tokens=100000, temperature=0.8, seed=round_, grammar='root ::= [a-z] root')
        got, errors = [], []
        started = threading.Event()

        def iterate():
            try:
                for piece in s:
                    got.append(piece)
                    started.set()
            except Exception as e:  # noqa: BLE001 - any exception is the failure reported below
                errors.append(e)
            started.set()

        t = threading.Thread(target=iterate)
        t.start()
        started.wait(10)
        s.close()
        t.join(10)
        assert not t.is_alive() and not errors and got and s.stop_reason == "cancelled", (round_, errors)
    assert model.generate(PROMPT, max_tokens=4, temperature=0).text()


def test_close_waits_for_a_call_in_flight(model_path):
    """close() on one thread while another is inside the library (tokenize, stats, trim) freed the
    model under that call. Now close() takes the model's call lock: a call in flight ends first, and
    a call after it is told the model is closed."""
    m = octo.Model(model_path)
    held, release = threading.Event(), threading.Event()

    def in_flight():  # stands for a call inside the library: it holds the lock each call takes
        with m._calls:
            held.set()
            release.wait(10)

    t = threading.Thread(target=in_flight)
    t.start()
    held.wait(10)
    threading.Timer(0.5, release.set).start()
    t0 = time.monotonic()
    m.close()
    assert time.monotonic() - t0 >= 0.4 and release.is_set()
    t.join(10)
    for call in (lambda: m.tokenize(PROMPT), m.stats, lambda: m.trim("low")):
        with pytest.raises(octo.OctoError, match="the model is closed"):
            call()
    # the same race for real: calls on one thread, close() on another, 20 times
    text = PROMPT * 200
    for round_ in range(20):
        m = octo.Model(model_path)
        errors = []

        def calls():
            try:
                while True:
                    m.tokenize(text)
                    m.stats()
            except octo.OctoError as e:
                errors.append(str(e))

        t = threading.Thread(target=calls)
        t.start()
        time.sleep(0.01 * (round_ % 5))
        m.close()
        t.join(10)
        assert not t.is_alive() and errors == ["the model is closed"], (round_, errors)


def test_calls_beside_a_stream_keep_their_messages(model_path):
    """Issue 59, 9 (as in the JVM binding): beside the model's own stream on another thread, a start
    is refused BUSY with its own message, a session past max_sessions with its own, and tokenize
    answers; before the model's call lock, a message could be read after another call cleared it."""
    with octo.Model(model_path, max_sessions=1) as m:
        ids = m.tokenize(PROMPT)
        stop, wrong, busy = threading.Event(), [], [0]

        def stream():
            while not stop.is_set():
                try:
                    m.generate("Once", max_tokens=64, temperature=0).text()
                except octo.OctoError as e:  # this thread's start lost the model to the other's
                    if "serving a stream" not in str(e):
                        wrong.append(("streamer", str(e)))

        t = threading.Thread(target=stream)
        t.start()
        for i in range(20000):
            try:
                m.generate("Once", max_tokens=1, temperature=0).close()
            except octo.OctoError as e:
                busy[0] += 1
                if e.status != 21 or "serving a stream" not in str(e):
                    wrong.append(("generate", str(e)))
            try:
                m.session()
                wrong.append(("session", "opened"))
            except octo.OctoError as e:
                if "sessions are open" not in str(e):
                    wrong.append(("session", str(e)))
            if m.tokenize(PROMPT) != ids:
                wrong.append(("tokenize", ""))
            if wrong:
                break
        stop.set()
        t.join()
        assert wrong == []
        assert busy[0] > 2000, busy[0]
