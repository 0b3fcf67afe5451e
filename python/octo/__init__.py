"""octo: on-device LLM inference, from Python.

    import octo
    model = octo.Model("model.gguf")                      # or a deploy bundle's folder
    for piece in model.generate("Once upon a time", max_tokens=64):
        print(piece, end="", flush=True)
    print(model.stats().decode_tokens_per_s)

Model(path, **options) loads a model (Model() the embedded stories260K) (options below). generate(prompt, ...) and chat(messages, ...)
return a Stream: iterate it for text pieces (str; a piece never splits a character), call cancel()
from any thread to stop it, read stop_reason after it ends. stats() and info() return dataclasses
with every field of octo_stats / octo_model_info. Errors raise OctoError with octo's message and
status; a bad argument is one too (status 1, invalid argument), whether the library or the binding
finds it: an integer outside its C type's range (ctypes would wrap it), a float that is not finite,
a string with a NUL byte (C would end it there). An unknown name (kv_policy, spec) is a ValueError.
The library is ctypes over libocto.so (OCTO_LIBRARY names it; else the copy the wheel carries; else
the loader's path), checked at import against this package's version and struct layout.
"""
import contextlib
import ctypes
import dataclasses
import json
import math
import operator
import os
import re
import threading
import weakref

from . import _lib
from ._version import __version__

__all__ = ["Model", "Session", "Adapter", "Stream", "OctoError", "LibraryError", "Stats", "Info", "version", "__version__",
           "EMBEDDED_MODEL", "finetune", "FinetuneProgress", "FinetuneResult", "fedavg", "FedavgResult"]


def _embedded_model():
    """The model the package carries (the wheel's octo/models/), else the source tree's models/ (a
    checkout imported in place); None when neither is there."""
    here = os.path.dirname(os.path.abspath(__file__))
    for p in (os.path.join(here, "models", "stories260K.gguf"),
              os.path.join(os.path.dirname(os.path.dirname(here)), "models", "stories260K.gguf")):
        if os.path.isfile(p):
            return p
    return None


#: stories260K, a 260K-parameter TinyStories model (llama2.c, MIT): what Model() loads without a path
EMBEDDED_MODEL = _embedded_model()

# A hub reference as `octo pull` takes it (tools/pull_ref.c): ORG/REPO[@REV][:QUANT], hf://ORG/REPO[@REV]/PATH
_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_REPO_REF = re.compile(r"^(?:hf://)?(%s)/(%s)(?:@(%s))?(?::(%s))?$" % (_NAME, _NAME, _NAME, _NAME))
_FILE_REF = re.compile(r"^hf://(%s)/(%s)(?:@(%s))?/(.+)$" % (_NAME, _NAME, _NAME))


def _cache_root():
    """octo's download cache, as `octo pull` finds it: $OCTO_CACHE, $XDG_CACHE_HOME/octo, ~/.cache/octo."""
    o, x, h = os.environ.get("OCTO_CACHE"), os.environ.get("XDG_CACHE_HOME"), os.environ.get("HOME")
    return o if o else os.path.join(x, "octo") if x and x.startswith("/") else \
        os.path.join(h, ".cache", "octo") if h else None


def _pulled(ref):
    """The cached file of a hub reference `octo pull` took; None when ref is not one (a path, then).
    The binding does not download: a reference not pulled yet is an OctoError saying how to pull it."""
    local = os.path.exists(ref) or ref.endswith(".gguf") or os.path.isdir(ref.split("/")[0])
    f = _FILE_REF.match(ref)
    r = None if f or local else _REPO_REF.match(ref)
    if not (f or r):
        return None
    root = _cache_root()
    path = None
    if root and f:
        org, repo, rev, rel = f.groups()
        if ".." not in rel.split("/"):
            path = os.path.join(root, "models", "hf", org, repo, rev or "main", rel)
    elif root:
        org, repo, rev, quant = r.groups()
        alias = os.path.join(root, "refs", org, repo, rev or "main", quant.lower() if quant else "_default")
        try:
            with open(alias) as fh:
                rel = fh.readline().strip()
            if rel and not rel.startswith("/") and ".." not in rel.split("/"):
                path = os.path.join(root, rel)
        except OSError:
            pass
    if path and os.path.isfile(path):
        return path
    raise OctoError(f"{ref} is not in octo's cache ({root or 'no cache folder: set OCTO_CACHE or HOME'}): "
                    f"`octo pull {ref}` downloads it", 4)  # OCTO_ERR_NOT_FOUND

LibraryError = _lib.LibraryError
_L = _lib.load()

STOP_REASONS = {0: "running", 1: "end_of_turn", 2: "max_tokens", 3: "cancelled", 4: "context_full", 5: "error"}


class OctoError(Exception):
    """A failure octo reported: .status is its octo_status number, .status_name its name."""

    def __init__(self, message, status=0):
        super().__init__(message)
        self.status = status
        self.status_name = _L.octo_status_name(status).decode() if status else ""


def version():
    """The library's version ("MAJOR.MINOR.PATCH")."""
    return _L.octo_version().decode()


def _dataclass_of(struct, name):
    """A frozen dataclass with the struct's fields; char arrays become str."""
    fields = [(f, str if issubclass(t, ctypes.Array) else type(t().value if hasattr(t(), "value") else 0))
              for f, t in struct._fields_]
    return dataclasses.make_dataclass(name, fields, frozen=True)


Stats = _dataclass_of(_lib.Stats, "Stats")
Info = _dataclass_of(_lib.ModelInfo, "Info")
FinetuneProgress = _dataclass_of(_lib.FinetuneProgress, "FinetuneProgress")
FinetuneResult = _dataclass_of(_lib.FinetuneResult, "FinetuneResult")
FedavgResult = _dataclass_of(_lib.FedavgResult, "FedavgResult")


def _convert(struct_value, cls):
    values = {}
    for f, t in struct_value._fields_:
        v = getattr(struct_value, f)
        values[f] = v.decode("utf-8", "replace") if isinstance(v, bytes) else v
    return cls(**values)


INVALID_ARG = 1  # octo_status OCTO_ERR_INVALID_ARG: what the library says of a value out of range
INT_RANGE = (-2**31, 2**31 - 1)  # C int
U64_RANGE = (0, 2**64 - 1)  # uint64_t
FLT_MAX = 3.4028234663852886e38  # float: a larger double becomes inf


def _int(name, v, bounds=INT_RANGE):
    """v as an integer within its C type's bounds, checked here: ctypes would wrap it silently."""
    v = operator.index(v)
    if not bounds[0] <= v <= bounds[1]:
        raise OctoError(f"{name} must be within {bounds[0]}..{bounds[1]} (its C type), not {v}", INVALID_ARG)
    return v


def _float(name, v):
    """v as a finite C float (NaN, the infinities and magnitudes past FLT_MAX are refused)."""
    v = float(v)
    if not math.isfinite(v) or abs(v) > FLT_MAX:
        raise OctoError(f"{name} must be a finite number, not {v!r}", INVALID_ARG)
    return v


def _text(name, s):
    """A str (UTF-8) or bytes as C text: a NUL byte would end it early there, so it is refused."""
    b = s if isinstance(s, bytes) else s.encode()
    if b"\0" in b:
        raise OctoError(f"{name} contains a NUL byte (C text would end there)", INVALID_ARG)
    return b


def _enc(name, s):
    """A path (str, bytes or os.PathLike) or None, as C text."""
    return None if s is None else _text(name, os.fsencode(s))


class Stream:
    """The pieces of one generation. Iterate it (one thread at a time); cancel() and close() are safe
    from any thread: close() while another thread is inside the iteration cancels the generation,
    waits for that step to return, then frees it."""

    def __init__(self, model, handle):
        self._model = model  # the Model or Session that started it (it holds this stream only weakly)
        self._h = handle
        self._lock = threading.Lock()  # _h and _stepping
        self._idle = threading.Condition(self._lock)  # notified when a step returns
        self._stepping = False  # a thread is inside octo_stream_next
        self.stop_reason = "running"

    def __iter__(self):
        return self

    def __next__(self):
        with self._lock:
            if self._h is None:
                raise StopIteration
            if self._stepping:
                raise RuntimeError("a stream is iterated by one thread at a time")
            self._stepping, h = True, self._h
        try:
            with self._model._calls:  # a model's own stream reports its failures in the model's error
                p = _L.octo_stream_next(h)
                piece = ctypes.string_at(p, _L.octo_stream_piece_size(h)).decode("utf-8", "replace") if p else None
        finally:
            with self._lock:
                self._stepping = False
                self._idle.notify_all()
        if piece is None:
            self._finish()
            raise StopIteration
        return piece

    def text(self):
        """The rest of the generation as one string."""
        return "".join(self)

    def cancel(self):
        """Stop before the next token (the iteration then ends; stop_reason "cancelled")."""
        with self._lock:
            if self._h is not None:
                _L.octo_stream_cancel(self._h)

    @property
    def tokens_generated(self):
        with self._lock:
            return _L.octo_stream_token_count(self._h) if self._h is not None else 0

    def _finish(self):
        with self._model._calls, self._lock:
            if self._h is None:  # closed by another thread meanwhile
                return
            status = _L.octo_stream_status(self._h)
            err = (_L.octo_stream_error(self._h) or b"").decode("utf-8", "replace")
            self.stop_reason = STOP_REASONS.get(_L.octo_stream_stop_reason(self._h), "error")
        self.close()
        if status:
            raise OctoError(err, status)

    def close(self):
        """Free the stream (the model can then start another); iteration ends. A stream closed
        before its end stops as one cancelled (stop_reason "cancelled", as octo reports it)."""
        with self._lock:
            if self._h is not None and self._stepping:
                _L.octo_stream_cancel(self._h)  # the step in another thread returns at its next token
                while self._stepping:
                    self._idle.wait()
            if self._h is not None:
                _L.octo_stream_free(self._h)
                self._h = None
                self._model._stream_ref = None
                if self.stop_reason == "running":
                    self.stop_reason = STOP_REASONS[3]

    def __del__(self):
        if getattr(self, "_lock", None) is not None:
            self.close()


def _params(max_tokens, temperature, top_k, top_p, min_p, seed, spec, prompt_compress=0.0, grammar=None,
            json_schema=None):
    p = _L.octo_generate_params_defaults()
    if grammar is not None:
        p.grammar = _text("grammar", grammar)
    if json_schema is not None:  # a dict (or list, bool) is written as JSON; a str is taken as the schema's text
        p.json_schema = _text("json_schema", json_schema if isinstance(json_schema, str) else json.dumps(json_schema))
    p.prompt_compress = _float("prompt_compress", prompt_compress)
    p.max_tokens, p.top_k = _int("max_tokens", max_tokens), _int("top_k", top_k)
    p.temperature, p.top_p = _float("temperature", temperature), _float("top_p", top_p)
    p.min_p = _float("min_p", min_p)
    p.seed = int.from_bytes(os.urandom(8), "little") if seed is None else _int("seed", seed, U64_RANGE)
    if spec is not None:
        m = _L.octo_spec_mode_from_name(_text("spec", spec))
        if m < 0:
            raise ValueError(f"unknown spec mode {spec!r}")
        p.spec = m
    return p


def _messages(messages):
    """[{"role": ..., "content": ...}, ...] as an array of octo_message (its strings kept alive by it)."""
    keep = [(_text(f"messages[{i}]['role']", m["role"]), _text(f"messages[{i}]['content']", m["content"]))
            for i, m in enumerate(messages)]
    return (_lib.Message * len(keep))(*[_lib.Message(r, c) for r, c in keep])


class _Conversation:
    """generate and chat, for a Model's own conversation and a Session's. A subclass gives
    _check, _error (the last failure's text), _status (its octo_status), _gen(prompt, params), _chat(messages, n, params) and
    _fit(messages, n, reserve_tokens)."""

    _stream_ref = None  # the running stream, weakly: a stream the caller dropped is freed, not kept busy
    # Held by a call that writes or reads the conversation's error, and by each step of its stream:
    # a Model's own conversation reports in the model's error, which octo.h lets one thread at a
    # time use (only cancel, stats and trim run beside a stream). A Session's error is its own.
    # Model.close() takes it too, so each call checks for a closed model again inside it.
    _calls = contextlib.nullcontext()

    @property
    def _stream(self):
        return self._stream_ref() if self._stream_ref is not None else None

    def _start(self, handle):
        if not handle:
            raise OctoError(self._error(), self._status())
        s = Stream(self, handle)
        self._stream_ref = weakref.ref(s)
        return s

    def generate(self, prompt, *, max_tokens=256, temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, seed=None,
                 spec=None, prompt_compress=0.0, grammar=None, json_schema=None):
        """A Stream of the continuation of prompt. seed None: a random one (a fixed seed repeats the text).
        prompt_compress in (0, 1): with a draft model, the share of the prompt the model reads (SpecPC).
        grammar (GBNF text) or json_schema (a dict or its JSON text): the text follows it (docs/structured-output.md)."""
        self._check()
        p = _params(max_tokens, temperature, top_k, top_p, min_p, seed, spec, prompt_compress, grammar, json_schema)
        with self._calls:
            self._check()
            return self._start(self._gen(_text("prompt", prompt), ctypes.byref(p)))

    def chat(self, messages, *, max_tokens=256, temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, seed=None,
             spec=None, grammar=None, json_schema=None):
        """A Stream of the assistant's reply to messages ([{"role": ..., "content": ...}, ...]);
        grammar / json_schema as for generate."""
        self._check()
        p = _params(max_tokens, temperature, top_k, top_p, min_p, seed, spec, grammar=grammar, json_schema=json_schema)
        arr = _messages(messages)
        with self._calls:
            self._check()
            return self._start(self._chat(arr, len(arr), ctypes.byref(p)))

    def chat_fit(self, messages, reserve_tokens=0):
        """How many of the oldest messages after a leading system message to leave out so that the
        chat and reserve_tokens for the reply fit the context (octo_chat_fit): messages[:1] +
        messages[1 + n:] with a system message, messages[n:] without. OctoError (status 20, context
        full) when the system message and the last one alone do not fit."""
        self._check()
        arr = _messages(messages)
        with self._calls:
            self._check()
            n = self._fit(arr, len(arr), _int("reserve_tokens", reserve_tokens))
            if n < 0:
                raise OctoError(self._error(), -n)
        return n


    def set_adapters(self, adapters=(), scales=None):
        """Run this conversation with these Adapters (Model.load_adapter), each at its scale (scales None: 1
        each; 0 gives the base's output exactly); () for the base alone. A different set empties the
        conversation's cache. Not while it streams."""
        self._check()
        adapters = list(adapters)
        if any(not isinstance(a, Adapter) or a._h is None for a in adapters):
            raise TypeError("set_adapters takes open Adapters (Model.load_adapter)")
        scales = [1.0] * len(adapters) if scales is None else [float(x) for x in scales]
        if len(scales) != len(adapters):
            raise ValueError(f"{len(adapters)} adapters and {len(scales)} scales")
        hs = (ctypes.c_void_p * max(1, len(adapters)))(*[a._h for a in adapters])
        sc = (ctypes.c_float * max(1, len(scales)))(*scales)
        with self._calls:
            self._check()
            rc = self._set_adapters(hs, sc, len(adapters))
            if rc:
                raise OctoError(self._error(), rc)

    def embed(self, text):
        """The text's embedding (octo_embed): the mean of the model's last hidden state over its
        tokens, after the final norm, unit length; a list of n_embd floats. The conversation's
        cache is left empty (the next prompt is read whole)."""
        self._check()
        t = _text("text", text)
        with self._calls:
            self._check()
            n = self._embed(t, None, 0)
            if n < 0:
                raise OctoError(self._error(), -n)
            out = (ctypes.c_float * n)()
            got = self._embed(t, out, n)
            if got < 0:
                raise OctoError(self._error(), -got)
        return list(out)


class Adapter:
    """A LoRA adapter loaded against a Model (Model.load_adapter). info: its matrices, ranks, alpha and
    bytes. close() gives the handle up; a conversation still using it keeps it until it sets others."""

    def __init__(self, handle):
        self._h = handle

    @property
    def info(self):
        if self._h is None:
            raise OctoError("the adapter is closed", 1)
        i = _L.octo_adapter_info_get(self._h)
        return {"n_matrices": i.n_matrices, "rank_min": i.rank_min, "rank_max": i.rank_max, "alpha": i.alpha,
                "bytes": i.bytes}

    def close(self):
        if self._h is not None:
            _L.octo_adapter_free(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


class Model(_Conversation):
    """A loaded model: a GGUF file or a deploy bundle's folder, a hub reference `octo pull` took
    (ORG/REPO[:QUANT], hf://ORG/REPO/PATH: its cached file), or without a path the embedded
    stories260K (EMBEDDED_MODEL). Options (all optional):

    n_ctx, n_threads, device ("pixel-8", ..., or "host"), cache_dir, draft_model,
    auto_draft ("auto", "self", "none"), draft_threads (cores of the draft's own: it then drafts
    while the model verifies; 0 = the efficiency cores where there are two classes), kv_budget_bytes, kv_policy ("morphkv", "snapkv", ...),
    kv_compress (bool), max_sessions (conversations at once: this model's own plus model.session()s).
    """

    # what close() reads, there even when __init__ never ran (a misspelt keyword is a TypeError first)
    _client = _model = None
    _sessions = ()

    def __init__(self, path=None, *, n_ctx=0, n_threads=0, device=None, cache_dir=None, draft_model=None,
                 auto_draft="auto", draft_threads=0, kv_budget_bytes=0, kv_policy=None, kv_compress=True,
                 max_sessions=1):
        self._sessions = []
        self._calls = threading.RLock()  # _Conversation._calls: the model's error is one thread's at a time
        if path is None:
            if EMBEDDED_MODEL is None:
                raise OctoError("no model given, and this package carries no embedded stories260K: "
                                "octo.Model(PATH) with a GGUF file or a deploy bundle's folder", 4)  # OCTO_ERR_NOT_FOUND
            path = EMBEDDED_MODEL
        elif isinstance(path, str):
            path = _pulled(path) or path
        # checked before anything is made: alive while the C side holds them
        self._keep = [_enc("device", device), _enc("cache_dir", cache_dir), _enc("draft_model", draft_model)]
        c_path = _enc("path", path)
        n_ctx, n_threads = _int("n_ctx", n_ctx), _int("n_threads", n_threads)
        draft_threads, max_sessions = _int("draft_threads", draft_threads), _int("max_sessions", max_sessions)
        kv_budget_bytes = _int("kv_budget_bytes", kv_budget_bytes, U64_RANGE)
        kv_policy = None if kv_policy is None else _text("kv_policy", kv_policy)
        co = _L.octo_client_options_defaults()
        co.n_threads, co.device, co.cache_dir = n_threads, self._keep[0], self._keep[1]
        self._client = _L.octo_client_new(ctypes.byref(co))
        if not self._client:
            raise MemoryError("octo_client_new")
        mo = _L.octo_model_options_defaults()
        mo.n_ctx, mo.draft_model = n_ctx, self._keep[2]
        mo.auto_draft = {"auto": 0, "self": 1, "none": -1}[auto_draft]
        mo.draft_threads = draft_threads
        mo.kv.budget_bytes, mo.kv.compress = kv_budget_bytes, int(bool(kv_compress))
        mo.max_sessions = max_sessions
        if kv_policy is not None:
            p = _L.octo_kv_policy_from_name(kv_policy)
            if p < 0:
                raise ValueError(f"unknown kv_policy {kv_policy.decode()!r}")
            mo.kv.policy = p
        self._model = _L.octo_load_model(self._client, c_path, ctypes.byref(mo))
        if not self._model:
            msg = _L.octo_last_error(self._client).decode("utf-8", "replace")
            status = _L.octo_last_status(self._client)
            self.close()
            raise OctoError(msg, status)

    def _error(self):
        return _L.octo_model_error(self._model).decode("utf-8", "replace")

    def _status(self):
        return _L.octo_model_status(self._model)

    def _gen(self, prompt, params):
        return _L.octo_generate(self._model, prompt, params)

    def _chat(self, messages, n, params):
        return _L.octo_chat(self._model, messages, n, params)

    def _fit(self, messages, n, reserve_tokens):
        return _L.octo_chat_fit(self._model, messages, n, reserve_tokens)

    def _set_adapters(self, hs, sc, n):
        return _L.octo_set_adapters(self._model, hs, sc, n)

    def load_adapter(self, path):
        """A LoRA adapter (llama.cpp's adapter GGUF) read against this model, for set_adapters on it and its sessions."""
        self._check()
        with self._calls:
            self._check()
            h = _L.octo_adapter_load(self._model, _enc("path", path))
            if not h:
                raise OctoError(self._error(), self._status())
        return Adapter(h)

    def session(self):
        """Another conversation on this model (its own KV cache; up to max_sessions at once)."""
        self._check()
        with self._calls:
            self._check()
            h = _L.octo_session_new(self._model)
            if not h:
                raise OctoError(self._error(), 21)
        s = Session(self, h)
        self._sessions.append(s)
        return s

    def cancel(self):
        """Cancel the model's current generation, from any thread."""
        s = self._stream
        if s is not None:
            s.cancel()

    def _embed(self, text, out, cap):
        return _L.octo_embed(self._model, text, out, cap)

    def stats(self):
        with self._calls:
            self._check()
            return _convert(_L.octo_model_stats(self._model), Stats)

    def info(self):
        with self._calls:
            self._check()
            return _convert(_L.octo_model_info_get(self._model), Info)

    TRIM_LEVELS = {"none": 0, "low": 1, "moderate": 2, "critical": 3}

    def trim(self, level):
        """Give memory back ("low", "moderate", "critical") or take it again ("none"):
        the app's memory signal (Android's onTrimMemory, iOS's memory warning)."""
        if level not in self.TRIM_LEVELS:
            raise ValueError("trim level must be one of %s, not %r" % (", ".join(self.TRIM_LEVELS), level))
        with self._calls:  # its failure is in the model's error
            self._check()
            rc = _L.octo_model_trim(self._model, self.TRIM_LEVELS[level])
            if rc:
                raise OctoError(self._error(), rc)

    def tokenize(self, text, add_special=True):
        """The token ids of text."""
        self._check()
        raw = text.encode()
        with self._calls:
            self._check()
            n = _L.octo_tokenize(self._model, raw, len(raw), int(add_special), 0, None, 0)
            if n < 0:
                raise OctoError(_L.octo_model_error(self._model).decode("utf-8", "replace"), -n)
            ids = (ctypes.c_int32 * max(n, 1))()
            n = _L.octo_tokenize(self._model, raw, len(raw), int(add_special), 0, ids, n)
        return list(ids[:n])

    def _check(self):
        if self._model is None:
            raise OctoError("the model is closed", 1)

    def close(self):
        s = self._stream
        if s is not None:
            s.close()
        for s in self._sessions:
            s.close()
        self._sessions = []
        with self._calls:  # a call another thread has inside the library ends first
            if self._model:
                _L.octo_model_free(self._model)
            if self._client:
                _L.octo_client_free(self._client)
            self._model = self._client = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


class Session(_Conversation):
    """One more conversation on a Model (Model.session()): generate, chat, stats, reset, close.
    Sessions of one model may generate from different threads at once."""

    def __init__(self, model, handle):
        self._owner = model
        self._h = handle

    def _error(self):
        return _L.octo_session_error(self._h).decode("utf-8", "replace")

    def _status(self):
        return _L.octo_session_status(self._h)

    def _gen(self, prompt, params):
        return _L.octo_session_generate(self._h, prompt, params)

    def _chat(self, messages, n, params):
        return _L.octo_session_chat(self._h, messages, n, params)

    def _fit(self, messages, n, reserve_tokens):
        return _L.octo_session_chat_fit(self._h, messages, n, reserve_tokens)

    def _embed(self, text, out, cap):
        return _L.octo_session_embed(self._h, text, out, cap)

    def _set_adapters(self, hs, sc, n):
        return _L.octo_session_set_adapters(self._h, hs, sc, n)

    def stats(self):
        self._check()
        return _convert(_L.octo_session_stats(self._h), Stats)

    def reset(self):
        self._check()
        _L.octo_session_reset(self._h)

    def _check(self):
        if self._h is None:
            raise OctoError("the session is closed", 1)

    def close(self):
        s = self._stream
        if s is not None:
            s.close()
        if self._h is not None:
            _L.octo_session_free(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def fedavg(base, updates, output, *, from_=None, partial=False):
    """Average a federated round's updates (files octo finetune --fl-round wrote) into the round's global
    adapter at `output` (from_: the previous round's global; None: round 1), or with partial=True into an
    aggregate that averages with others as its updates would. Every update is checked first; a bad one
    raises OctoError naming it and nothing is written. Returns a FedavgResult. docs/federated.md."""
    keep = [_enc("base", base), _enc("output", output), _enc("from_", from_)] + \
        [_enc("updates", u) for u in updates]
    if not updates:
        raise ValueError("fedavg needs at least one update")
    arr = (ctypes.c_char_p * len(updates))(*keep[3:])
    p = _lib.FedavgParams(keep[2], arr, len(updates), keep[1], int(bool(partial)))
    client = _L.octo_client_new(None)
    if not client:
        raise MemoryError("octo_client_new")
    try:
        r = _lib.FedavgResult()
        rc = _L.octo_fedavg(client, keep[0], ctypes.byref(p), ctypes.byref(r))
        if rc:
            raise OctoError(_L.octo_last_error(client).decode("utf-8", "replace"), rc)
        return _convert(r, FedavgResult)
    finally:
        _L.octo_client_free(client)


def finetune(model, data, output, *, valid=None, steps=100, batch=4, seq_len=256, rank=16, alpha=32.0,
             targets=None, lr=1e-3, lr_min=1e-4, warmup=-1, clip=1.0, weight_decay=0.01, seed=1,
             type=None, checkpoint=None, checkpoint_every=10, restart=False, on_progress=None, distill=None,
             full=None, memory_budget=0, fl_round=0, fl_from=None, fl_device=None, fl_clip=0.0,
             fl_noise=0.0, fl_delta=0.0):
    """Train a LoRA adapter of the model file `model` on `data` (a text file, a folder of them, or a
    .jsonl of {"messages": [...]} conversations: the assistants' turns are learnt) and write it to
    `output` in llama.cpp's adapter format (Model.load_adapter reads it); type: "f32" (None), "f16",
    "bf16" or "q8_0". full=True trains every weight and writes a whole model GGUF; distill=TARGET
    learns TARGET's next-token distributions (a draft for it: every weight of a model up to 64 M
    parameters unless full=False). memory_budget: bytes a sequence's activations may take (0: what is
    free); past it each layer is computed again in the backward. on_progress(FinetuneProgress)
    is called after each step; returning True stops the run (its checkpoint written: OctoError with
    status 22, cancelled); the same call again resumes it, to the same bytes. Returns a FinetuneResult
    (losses, held-out losses when `valid` is given, the data's counts; for a mixture of experts, experts
    and experts_reached: those no training token reached are unchanged). docs/training.md.
    fl_round=R (fl_from: round R-1's global; fl_device: this device's id) trains a federated round's
    adapter, A frozen, and writes an update at `output` (docs/federated.md; fedavg averages them); fl_clip
    bounds its norm, fl_noise adds Gaussian noise of deviation fl_noise x fl_clip (the result's fl_epsilon:
    the (epsilon, fl_delta or 1e-5)-DP it gives)."""
    if isinstance(model, str):
        model = _pulled(model) or model
    keep = [_enc("model", model), _enc("data", data), _enc("output", output), _enc("valid", valid),
            _enc("checkpoint", checkpoint), _enc("targets", targets), _enc("type", type), _enc("distill", distill),
            _enc("fl_from", fl_from), _enc("fl_device", fl_device)]
    p = _L.octo_finetune_params_defaults()
    p.data, p.output, p.valid, p.checkpoint, p.targets, p.type = keep[1], keep[2], keep[3], keep[4], keep[5], keep[6]
    p.steps, p.batch, p.seq_len, p.rank = _int("steps", steps), _int("batch", batch), _int("seq_len", seq_len), \
        _int("rank", rank)
    p.warmup, p.checkpoint_every = _int("warmup", warmup), _int("checkpoint_every", checkpoint_every)
    p.alpha, p.lr, p.lr_min = _float("alpha", alpha), _float("lr", lr), _float("lr_min", lr_min)
    p.clip, p.weight_decay = _float("clip", clip), _float("weight_decay", weight_decay)
    p.seed, p.restart = _int("seed", seed, U64_RANGE), int(bool(restart))
    p.distill, p.full = keep[7], 0 if full is None else (1 if full else -1)
    p.memory_budget = _int("memory_budget", memory_budget, U64_RANGE)
    p.fl_round, p.fl_from, p.fl_device = _int("fl_round", fl_round), keep[8], keep[9]
    p.fl_clip, p.fl_noise, p.fl_delta = _float("fl_clip", fl_clip), _float("fl_noise", fl_noise), \
        _float("fl_delta", fl_delta)
    raised = []

    def progress(user, pp):
        try:
            return 1 if on_progress(_convert(pp.contents, FinetuneProgress)) else 0
        except BaseException as e:  # raised again once the run has stopped
            raised.append(e)
            return 1

    cb = _lib.FINETUNE_FN(progress) if on_progress else _lib.FINETUNE_FN()
    p.on_progress = cb
    client = _L.octo_client_new(None)
    if not client:
        raise MemoryError("octo_client_new")
    try:
        r = _lib.FinetuneResult()
        rc = _L.octo_finetune(client, keep[0], ctypes.byref(p), ctypes.byref(r))
        if raised:
            raise raised[0]
        if rc:
            raise OctoError(_L.octo_last_error(client).decode("utf-8", "replace"), rc)
        return _convert(r, FinetuneResult)
    finally:
        _L.octo_client_free(client)
