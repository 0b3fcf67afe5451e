"""The C library through ctypes: finding it, the public structs as include/octo.h lays them out,
the function signatures, and the handshake that checks both against the library loaded."""
import ctypes
import ctypes.util
import os

from ._version import __version__

c_int, c_float, c_double = ctypes.c_int, ctypes.c_float, ctypes.c_double
c_u64, c_i64, c_i32 = ctypes.c_uint64, ctypes.c_int64, ctypes.c_int32
c_char_p, c_void_p = ctypes.c_char_p, ctypes.c_void_p

LOG_FN = ctypes.CFUNCTYPE(None, c_void_p, c_int, c_char_p)
PREFILL_FN = ctypes.CFUNCTYPE(None, c_void_p, c_int, c_int)


def chars(n):
    return ctypes.c_char * n


class ClientOptions(ctypes.Structure):
    _fields_ = [("n_threads", c_int), ("device", c_char_p), ("cache_dir", c_char_p), ("log", LOG_FN),
                ("log_user", c_void_p)]


class KvOptions(ctypes.Structure):
    _fields_ = [("compress", c_int), ("policy", c_int), ("budget_bytes", c_u64), ("hot_tokens", c_int),
                ("warm_tokens", c_int), ("anchor_tokens", c_int), ("recent_tokens", c_int), ("cold_bits", c_int),
                ("cold_symmetric", c_int), ("per_token_keys", c_int), ("spill", c_int), ("spill_max_bytes", c_u64),
                ("budget_tokens", c_int)]


class MoeOptions(ctypes.Structure):
    _fields_ = [("cache_bytes", c_u64), ("cache_share", c_double), ("policy", c_int), ("prefetch", c_int),
                ("predict_margin", c_double), ("trace", c_char_p), ("int2", c_int)]


class ModelOptions(ctypes.Structure):
    _fields_ = [("n_ctx", c_int), ("kv_type", c_int), ("kv", KvOptions), ("draft_model", c_char_p),
                ("auto_draft", c_int), ("draft_threads", c_int), ("moe", MoeOptions), ("plan_only", c_int), ("max_sessions", c_int),
                ("vocab_only", c_int), ("memory_watch", c_int)]


class GenerateParams(ctypes.Structure):
    _fields_ = [("max_tokens", c_int), ("temperature", c_float), ("top_k", c_int), ("top_p", c_float),
                ("min_p", c_float), ("repeat_penalty", c_float), ("presence_penalty", c_float),
                ("repeat_last_n", c_int), ("seed", c_u64), ("parse_special", c_int), ("on_prefill", PREFILL_FN),
                ("user", c_void_p), ("spec", c_int), ("spec_k", c_int), ("spec_tree", c_int), ("spec_ahead", c_int),
                ("lookahead_w", c_int),
                ("lookahead_n", c_int), ("lookahead_g", c_int), ("prompt_compress", c_float),
                ("prompt_lookahead", c_int), ("grammar", c_char_p), ("json_schema", c_char_p),
                ("frequency_penalty", c_float), ("logprobs", c_int), ("top_logprobs", c_int)]


class Message(ctypes.Structure):
    _fields_ = [("role", c_char_p), ("content", c_char_p)]


class Memory(ctypes.Structure):
    _fields_ = [("rss_bytes", c_u64), ("peak_rss_bytes", c_u64), ("pss_bytes", c_u64)]


class ModelInfo(ctypes.Structure):
    _fields_ = [("arch", chars(32)), ("n_vocab", c_int), ("n_ctx_train", c_int), ("n_embd", c_int),
                ("n_layer", c_int), ("n_head", c_int), ("n_head_kv", c_int), ("head_dim", c_int), ("n_ff", c_int),
                ("n_expert", c_int), ("n_expert_used", c_int), ("rope_freq_base", c_float),
                ("rope_freq_scale", c_float), ("rms_eps", c_float), ("output_tied", c_int), ("n_tensors", c_u64),
                ("tensor_types", chars(256)), ("n_params", c_u64), ("file_bytes", c_u64), ("weight_bytes", c_u64),
                ("weight_bytes_per_token", c_u64), ("n_threads", c_int), ("draft_threads", c_int),
                ("cores", chars(160)),
                ("cpu_path", chars(16)), ("kv_bytes_per_token", c_u64), ("n_ctx", c_int),
                ("kv_budget_bytes", c_u64), ("kv_spill", chars(128)), ("kv_plan", chars(256)),
                ("speculation", chars(256)), ("n_ff_shared", c_int), ("origin", chars(320)),
                ("expert_bytes_one", c_u64), ("expert_bytes", c_u64), ("resident_weight_bytes", c_u64),
                ("expert_cache_budget", c_u64), ("expert_plan", chars(256)), ("expert_int2", chars(160)),
                ("weights", chars(224)), ("features", chars(512))]


class Stats(ctypes.Structure):
    _fields_ = [("prompt_tokens", c_int), ("prefill_tokens", c_int), ("prefill_ms", c_double),
                ("prefill_tokens_per_s", c_double), ("decode_tokens", c_int), ("decode_ms", c_double),
                ("decode_tokens_per_s", c_double), ("time_to_first_token_ms", c_double),
                ("context_tokens", c_int), ("context_size", c_int), ("kv_bytes", c_u64), ("kv_draft_bytes", c_u64),
                ("kv_budget_bytes", c_u64), ("kv_cache_utilization", c_double), ("kv_bytes_hot", c_u64),
                ("kv_bytes_warm", c_u64), ("kv_bytes_cold", c_u64), ("kv_tokens_retained", c_i64),
                ("kv_tokens_evicted", c_i64), ("kv_policy", chars(12)), ("kv_spill_on", c_int),
                ("kv_blocks_spilled", c_i64), ("kv_spill_writes", c_i64), ("kv_spill_clean", c_i64),
                ("kv_spill_reads", c_i64), ("kv_spill_hits", c_i64), ("kv_spill_errors", c_i64),
                ("kv_spill_prefetched", c_i64), ("kv_spill_read_us", c_double), ("kv_spill_hit_rate", c_double),
                ("kv_spill_file_bytes", c_u64), ("kv_spill_note", chars(160)),
                ("speculative_acceptance_rate", c_double), ("spec_proposed", c_int), ("spec_accepted", c_int),
                ("spec_steps", c_int), ("spec_k", c_int), ("spec_tree_passes", c_int), ("spec_off_line", c_int),
                ("spec_ahead_used", c_int), ("spec_ahead_dropped", c_int),
                ("spec_ms", c_double), ("spec_draft_ms", c_double),
                ("spec_proposer", chars(12)), ("lookahead_ngrams", c_int), ("lookahead_new", c_int),
                ("lookahead_pool_proposed", c_int), ("lookahead_pool_accepted", c_int), ("spec_note", chars(96)),
                ("expert_cache_hit_rate", c_double), ("expert_lookups", c_u64), ("expert_bytes_read", c_u64),
                ("expert_stall_ms", c_double), ("expert_cache_bytes", c_u64), ("expert_cache_capacity", c_u64),
                ("expert_bytes", c_u64), ("expert_prediction_rate", c_double),
                ("expert_prediction_precision", c_double), ("expert_prefetch_recall", c_double),
                ("expert_prefetched", c_u64), ("expert_readahead_share", c_double), ("expert_tokens", c_u64),
                ("expert_batch_saved_bytes_per_token", c_double), ("expert_bytes_read_per_token", c_double),
                ("expert_stall_ms_per_token", c_double), ("expert_trace_failed", c_int),
                ("expert_int2_loads", c_u64), ("expert_int2_served", c_u64), ("expert_int2_promotions", c_u64),
                ("expert_int2_errors", c_u64), ("rss_bytes", c_u64), ("peak_rss_bytes", c_u64),
                ("chat_template", chars(16)), ("warning", chars(160)), ("prefill_speckv", c_int),
                ("prefill_lookahead_tokens", c_int), ("prefill_draft_ms", c_double),
                ("kv_tokens_kept_by_score", c_i64), ("prompt_tokens_dropped", c_int),
                ("prefill_ms_saved", c_double), ("mem_level", c_int), ("mem_trims", c_int), ("mem_regrows", c_int),
                ("mem_pressure_events", c_int), ("mem_released_weights_bytes", c_u64),
                ("mem_released_draft_bytes", c_u64), ("mem_released_experts_bytes", c_u64),
                ("mem_released_kv_bytes", c_u64), ("weights_packed_bytes", c_u64), ("mem_room_bytes", c_u64),
                ("adapter_bytes", c_u64), ("mem_released_adapter_bytes", c_u64),
                ("mem_watch", chars(384)), ("mem_note", chars(200)), ("decode_latency_tokens", c_int),
                ("decode_latency_p50_ms", c_double), ("decode_latency_p90_ms", c_double),
                ("decode_latency_p95_ms", c_double), ("decode_latency_p99_ms", c_double),
                ("decode_latency_max_ms", c_double), ("decode_latency_cv", c_double), ("cpu_threads", c_int),
                ("cpu_effective", c_double), ("cpu_changes", c_int), ("cpu_probes", c_int), ("cpu_spin", c_int), ("cpu_paced", c_int), ("cpu_note", chars(400)),
                ("cpu_hint", chars(160)), ("cpu_kernels", chars(96)), ("batch_steps", c_int), ("batch_mean", c_double),
                ("batch_model_steps", c_i64), ("batch_model_mean", c_double), ("batch_model_max", c_int),
                ("batch_model_last", c_int), ("batch_model_prompt_rows", c_i64), ("batch_model_verify", c_i64),
                ("batch_model_retried", c_i64)]


class AdapterInfo(ctypes.Structure):
    _fields_ = [("n_matrices", c_int), ("rank_min", c_int), ("rank_max", c_int), ("alpha", c_float),
                ("bytes", c_u64)]


class FinetuneProgress(ctypes.Structure):
    _fields_ = [("step", c_i64), ("steps", c_i64), ("loss", c_double), ("lr", c_double), ("grad_norm", c_double),
                ("tokens", c_i64), ("elapsed_s", c_double), ("tokens_per_s", c_double), ("eta_s", c_double),
                ("resumed_at", c_i64)]


FINETUNE_FN = ctypes.CFUNCTYPE(c_int, ctypes.c_void_p, ctypes.POINTER(FinetuneProgress))


class FinetuneParams(ctypes.Structure):
    _fields_ = [("data", c_char_p), ("valid", c_char_p), ("output", c_char_p), ("checkpoint", c_char_p),
                ("targets", c_char_p), ("type", c_char_p), ("steps", c_int), ("batch", c_int), ("seq_len", c_int),
                ("rank", c_int), ("alpha", c_float), ("lr", c_float), ("lr_min", c_float), ("warmup", c_int),
                ("clip", c_float), ("weight_decay", c_float), ("seed", c_u64), ("checkpoint_every", c_int),
                ("restart", c_int), ("on_progress", FINETUNE_FN), ("user", ctypes.c_void_p), ("distill", c_char_p),
                ("full", c_int), ("memory_budget", c_u64), ("fl_round", c_int), ("fl_from", c_char_p),
                ("fl_device", c_char_p), ("fl_clip", c_float), ("fl_noise", c_float), ("fl_delta", c_float)]


class FinetuneResult(ctypes.Structure):
    _fields_ = [("resumed_at", c_i64), ("steps_run", c_i64), ("first_loss", c_double), ("last_loss", c_double),
                ("valid_before", c_double), ("valid_after", c_double), ("seconds", c_double), ("sequences", c_i64),
                ("tokens", c_i64), ("counted", c_i64), ("conversations", c_int), ("conversations_cut", c_int),
                ("n_matrices", c_int), ("adapter_values", c_u64), ("full", c_int),
                ("recompute", c_int), ("activation_bytes", c_u64), ("memory_budget", c_u64),
                ("pressed", c_i64), ("experts", c_int), ("experts_reached", c_int), ("threads", c_int),
                ("thread_changes", c_int), ("fl_groups", c_int), ("fl_groups_sent", c_int), ("fl_bytes", c_u64),
                ("fl_dense_bytes", c_u64), ("fl_norm", c_double), ("fl_epsilon", c_double),
                ("fl_epsilon_rounds", c_double)]


class FedavgParams(ctypes.Structure):
    _fields_ = [("from_", c_char_p), ("updates", ctypes.POINTER(c_char_p)), ("n_updates", c_int), ("output", c_char_p),
                ("partial", c_int)]


class FedavgResult(ctypes.Structure):
    _fields_ = [("round", c_int), ("devices", c_int), ("tokens", c_u64), ("groups", c_int), ("groups_sent", c_int),
                ("seconds", c_double)]


# (struct, its name in octo.h): checked against octo_struct_size at load
STRUCTS = [(ClientOptions, "octo_client_options"), (KvOptions, "octo_kv_options"), (MoeOptions, "octo_moe_options"),
           (ModelOptions, "octo_model_options"), (ModelInfo, "octo_model_info"),
           (GenerateParams, "octo_generate_params"), (Message, "octo_message"), (Stats, "octo_stats"),
           (Memory, "octo_memory"), (AdapterInfo, "octo_adapter_info"), (FinetuneParams, "octo_finetune_params"),
           (FinetuneProgress, "octo_finetune_progress"), (FinetuneResult, "octo_finetune_result"),
           (FedavgParams, "octo_fedavg_params"), (FedavgResult, "octo_fedavg_result")]

P = ctypes.POINTER
SIGNATURES = {
    "octo_version": (c_char_p, []),
    "octo_struct_size": (c_int, [c_char_p]),
    "octo_status_name": (c_char_p, [c_int]),
    "octo_client_options_defaults": (ClientOptions, []),
    "octo_finetune_params_defaults": (FinetuneParams, []),
    "octo_finetune": (c_int, [c_void_p, c_char_p, P(FinetuneParams), P(FinetuneResult)]),
    "octo_fedavg": (c_int, [c_void_p, c_char_p, P(FedavgParams), P(FedavgResult)]),
    "octo_client_new": (c_void_p, [P(ClientOptions)]),
    "octo_client_free": (None, [c_void_p]),
    "octo_last_error": (c_char_p, [c_void_p]),
    "octo_last_status": (c_int, [c_void_p]),
    "octo_model_options_defaults": (ModelOptions, []),
    "octo_load_model": (c_void_p, [c_void_p, c_char_p, P(ModelOptions)]),
    "octo_model_free": (None, [c_void_p]),
    "octo_model_error": (c_char_p, [c_void_p]),
    "octo_model_status": (c_int, [c_void_p]),
    "octo_model_info_get": (ModelInfo, [c_void_p]),
    "octo_model_stats": (Stats, [c_void_p]),
    "octo_model_trim": (c_int, [c_void_p, c_int]),
    "octo_model_plan_json": (c_int, [c_void_p, c_char_p, c_int]),
    "octo_kv_policy_from_name": (c_int, [c_char_p]),
    "octo_spec_mode_from_name": (c_int, [c_char_p]),
    "octo_generate_params_defaults": (GenerateParams, []),
    "octo_generate": (c_void_p, [c_void_p, c_char_p, P(GenerateParams)]),
    "octo_chat": (c_void_p, [c_void_p, P(Message), c_int, P(GenerateParams)]),
    "octo_chat_fit": (c_int, [c_void_p, P(Message), c_int, c_int]),
    "octo_stream_next": (c_void_p, [c_void_p]),
    "octo_stream_piece_size": (c_int, [c_void_p]),
    "octo_stream_status": (c_int, [c_void_p]),
    "octo_stream_error": (c_char_p, [c_void_p]),
    "octo_stream_stop_reason": (c_int, [c_void_p]),
    "octo_stream_cancel": (None, [c_void_p]),
    "octo_stream_token_count": (c_int, [c_void_p]),
    "octo_stream_free": (None, [c_void_p]),
    "octo_tokenize": (c_int, [c_void_p, c_char_p, c_int, c_int, c_int, P(c_i32), c_int]),
    "octo_reset": (None, [c_void_p]),
    "octo_memory_usage": (Memory, []),
    "octo_session_new": (c_void_p, [c_void_p]),
    "octo_session_free": (None, [c_void_p]),
    "octo_session_error": (c_char_p, [c_void_p]),
    "octo_session_status": (c_int, [c_void_p]),
    "octo_session_generate": (c_void_p, [c_void_p, c_char_p, P(GenerateParams)]),
    "octo_session_chat": (c_void_p, [c_void_p, P(Message), c_int, P(GenerateParams)]),
    "octo_session_chat_fit": (c_int, [c_void_p, P(Message), c_int, c_int]),
    "octo_session_reset": (None, [c_void_p]),
    "octo_session_stats": (Stats, [c_void_p]),
    "octo_embed": (c_int, [c_void_p, c_char_p, P(c_float), c_int]),
    "octo_session_embed": (c_int, [c_void_p, c_char_p, P(c_float), c_int]),
    "octo_adapter_load": (c_void_p, [c_void_p, c_char_p]),
    "octo_adapter_free": (None, [c_void_p]),
    "octo_adapter_info_get": (AdapterInfo, [c_void_p]),
    "octo_set_adapters": (c_int, [c_void_p, P(c_void_p), P(c_float), c_int]),
    "octo_session_set_adapters": (c_int, [c_void_p, P(c_void_p), P(c_float), c_int]),
}


class LibraryError(ImportError):
    """The shared library is missing, or is not the one this package was written for."""


def _candidates():
    """$OCTO_LIBRARY; else the copy the wheel carries beside this file; else the loader's path."""
    env = os.environ.get("OCTO_LIBRARY")
    if env:
        return [env]
    bundled = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libocto.so.0")
    found = ctypes.util.find_library("octo")
    return ([bundled] if os.path.isfile(bundled) else []) + ["libocto.so.0"] + ([found] if found else [])


def load():
    """The library, its functions typed, its version and struct layout checked."""
    errors = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
            break
        except OSError as e:
            errors.append(f"{path}: {e}")
    else:
        raise LibraryError("libocto.so not found (" + "; ".join(errors) + "): install octo (cmake --install) "
                           "or set OCTO_LIBRARY to the library's path")
    for name, (res, args) in SIGNATURES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise LibraryError(f"{lib._name} has no {name}: an octo library older than this package "
                               f"({__version__})") from None
        fn.restype, fn.argtypes = res, args
    handshake(lib)
    return lib


def handshake(lib):
    """Same major.minor version, and every struct the size the library says."""
    have = lib.octo_version().decode()
    if have.split(".")[:2] != __version__.split(".")[:2]:
        raise LibraryError(f"{lib._name} is octo {have}; this package is for {__version__}")
    for struct, name in STRUCTS:
        theirs = lib.octo_struct_size(name.encode())
        if theirs != ctypes.sizeof(struct):
            raise LibraryError(f"{lib._name}: {name} is {theirs} bytes there, {ctypes.sizeof(struct)} here: "
                               f"the library and this package come from different builds")
