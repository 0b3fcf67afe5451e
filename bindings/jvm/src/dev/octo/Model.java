package dev.octo;

import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.LongFunction;

/**
 * A model loaded from a GGUF file or a deploy bundle's folder. Close it (try-with-resources);
 * a Model that is never closed is freed by a Cleaner once unreachable. Its streams are closed
 * with it. Calls after close() throw IllegalStateException.
 */
public final class Model implements AutoCloseable {
    static final Cleaner CLEANER = Cleaner.create();

    /** The native model and the streams open on it; what the Cleaner frees. */
    static final class State implements Runnable {
        final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
        final List<Stream.State> streams = new ArrayList<>();
        final List<Session.State> sessions = new ArrayList<>();
        final List<Adapter> adapters = new ArrayList<>();
        /**
         * Held by every call that writes or reads the model's error (octo_model_error: a start, a
         * callback generation, tokenize, detokenize, planJson, newSession, loadAdapter, setAdapters)
         * and by each step of the model's own streams, whose failures are reported there too. octo.h
         * lets only cancel, stats and trim run beside a stream; everything else on a model comes
         * from one thread at a time, and this is that one at a time: a call waits for the token in
         * progress, never for the whole stream (a callback generation holds it to its end).
         */
        final Object calls = new Object();

        /** f of the native model under the read lock and the model's call lock (calls). */
        <T> T call(LongFunction<T> f) {
            return read(h -> {
                synchronized (calls) {
                    return f.apply(h);
                }
            });
        }
        /** Native models not yet freed, in this JVM (the tests watch the Cleaner with it). */
        static final java.util.concurrent.atomic.AtomicInteger LIVE = new java.util.concurrent.atomic.AtomicInteger();
        long handle;

        State(long handle) {
            this.handle = handle;
            LIVE.incrementAndGet();
        }

        long handle() {
            if (handle == 0) throw new IllegalStateException("the model is closed");
            return handle;
        }

        /** Set when close() begins: a call then fails at once instead of queueing behind it. */
        volatile boolean closing;

        /**
         * f of the native model under the read lock: close() waits for it to return. Once close()
         * has begun, a call from a thread not already inside one is an IllegalStateException at
         * once: queued behind close(), it could wait on a callback that waits on it.
         */
        <T> T read(LongFunction<T> f) {
            if (closing && lock.getReadHoldCount() == 0) throw new IllegalStateException("the model is closing");
            lock.readLock().lock();
            try {
                return f.apply(handle());
            } finally {
                lock.readLock().unlock();
            }
        }

        /**
         * Closes: a callback generation is told to stop, then the write lock waits for the calls in
         * progress; with the handle 0 nothing new starts or registers, the sessions and streams
         * are freed (each waits for a next() running on another thread, which the cancel ends), then
         * the model.
         */
        @Override
        public void run() {
            closing = true;
            if (handle != 0) Native.stopEach(handle); /* only run() writes handle, and it runs once */
            lock.writeLock().lock();
            try {
                final long h = handle;
                handle = 0;
                List<Session.State> ss;
                synchronized (sessions) {
                    ss = new ArrayList<>(sessions);
                }
                for (Session.State s : ss) s.run(); /* each with its streams: before the model */
                List<Stream.State> open;
                synchronized (streams) {
                    open = new ArrayList<>(streams);
                }
                for (Stream.State s : open) s.run(); /* cancelled, then freed: before the model */
                if (h != 0) {
                    Native.freeModel(h);
                    LIVE.decrementAndGet();
                }
                synchronized (adapters) { /* after the model: each handle then only frees */
                    for (Adapter a : adapters) {
                        Native.adapterFree(a.handle);
                        a.handle = 0;
                    }
                    adapters.clear();
                }
            } finally {
                lock.writeLock().unlock();
            }
        }
    }

    /** The type of new KV cache entries (octo_kv_type, in octo.h's order). */
    public enum KvType { F32, F16 }

    /** When an MoE model's I/O thread reads experts ahead (octo_moe_prefetch, in octo.h's order). */
    public enum Prefetch { AUTO, ON, OFF }

    /** The 2-bit copies of an MoE model's experts (octo_moe_int2, in octo.h's order). */
    public enum Int2 { AUTO, ON, OFF, ALL }

    /**
     * What octo would otherwise keep to itself (octo_client_options.log): warnings such as a
     * context past the model's trained length or a chat template it does not know. level is
     * octo_log_level: 0 debug, 1 info, 2 warning, 3 error. Called on the thread that caused the
     * message (today always the one calling octo), possibly while octo holds a lock: it must not
     * call back into the model. An exception it throws is dropped.
     */
    @FunctionalInterface
    public interface Log {
        void message(int level, String text);
    }

    /**
     * octo_model_options and octo_client_options, field by field (octo.h says what each does). An
     * option never set keeps octo's own default (the JNI side starts from
     * octo_model_options_defaults and copies only what was set); octo checks them at load, and a
     * bad one is an OctoException with octo's message. Integer.MIN_VALUE, Long.MIN_VALUE and NaN
     * are not values of any option: they mean "not set".
     */
    public static final class Builder {
        static final int UNSET = Integer.MIN_VALUE;
        static final long UNSET_LONG = Long.MIN_VALUE;

        private final String path;
        /* Read by name from octo_jni.c (model_fields, text_fields): rename on both sides. */
        int nCtx = UNSET, threads = UNSET, maxSessions = UNSET, autoDraft = UNSET, draftThreads = UNSET,
                memoryWatch = UNSET, planOnly = UNSET, vocabOnly = UNSET;
        int kvType = UNSET, kvCompress = UNSET, kvHotTokens = UNSET, kvWarmTokens = UNSET, kvAnchorTokens = UNSET,
                kvRecentTokens = UNSET, kvColdBits = UNSET, kvColdSymmetric = UNSET, kvPerTokenKeys = UNSET,
                kvSpill = UNSET, kvBudgetTokens = UNSET;
        long kvBudgetBytes = UNSET_LONG, kvSpillMaxBytes = UNSET_LONG, moeCacheBytes = UNSET_LONG;
        double moeCacheShare = Double.NaN, moePredictMargin = Double.NaN;
        int moePrefetch = UNSET, moeInt2 = UNSET;
        byte[] draft, device, cacheDir, kvPolicy, moePolicy, moeTrace;
        Native.LogSink logSink;

        Builder(String path) {
            this.path = path;
        }

        private static byte[] text(String s) {
            return s == null ? null : utf8(s);
        }

        /** Context in tokens; 0: the model's trained context. */
        public Builder contextLength(int n) { nCtx = n; return this; }

        /** Compute threads; 0: the performance cores this process may use. */
        public Builder threads(int n) { threads = n; return this; }

        /** Conversations at once, this model's own included (newSession). */
        public Builder maxSessions(int n) { maxSessions = n; return this; }

        /** A smaller model with the same vocabulary, for speculative decoding (null: NAME.draft.gguf if there). */
        public Builder draftModel(String path) { draft = text(path); return this; }

        /** A device profile ("pixel-8", "android-4gb-emmc", ...) planned for instead of this host. */
        public Builder device(String name) { device = text(name); return this; }

        /** A draft found or made by itself: 0 automatic, -1 none, 1 a Q4_0 self-draft (octo_model_options.auto_draft). */
        public Builder autoDraft(int mode) { autoDraft = mode; return this; }

        /** Cores of the draft's own (0: automatic). */
        public Builder draftThreads(int n) { draftThreads = n; return this; }

        /** Where the KV cache may spill to flash (null: no spill); Context.getCacheDir() on Android. */
        public Builder cacheDir(String dir) { cacheDir = text(dir); return this; }

        /** The memory watcher: 0 automatic, -1 off (trim still works). */
        public Builder memoryWatch(int mode) { memoryWatch = mode; return this; }

        /** Plan only (Model.planJson): decide what a load decides and make nothing; generation fails. */
        public Builder planOnly(boolean on) { planOnly = on ? 1 : 0; return this; }

        /** The vocabulary only: tokenize and detokenize work on a file of any architecture; generation fails. */
        public Builder vocabOnly(boolean on) { vocabOnly = on ? 1 : 0; return this; }

        /** The type of new KV entries (F16 by default). */
        public Builder kvType(KvType t) { kvType = t.ordinal(); return this; }

        /** false: every KV entry kept at kvType, no tiers and no eviction. */
        public Builder kvCompress(boolean on) { kvCompress = on ? 1 : 0; return this; }

        /** The KV caches' budget in bytes (0: from free memory). */
        public Builder kvBudgetBytes(long bytes) { kvBudgetBytes = bytes; return this; }

        /** Entries each layer's cache keeps at most (0: no limit). */
        public Builder kvBudgetTokens(int n) { kvBudgetTokens = n; return this; }

        /** The eviction policy by octo's name: "morphkv", "snapkv", "h2o", "window", "speckv", "none". */
        public Builder kvPolicy(String name) { kvPolicy = text(name); return this; }

        /** The KV tiers' windows in tokens: newest at F16, younger than warm at INT8 (hot <= warm). */
        public Builder kvWindows(int hotTokens, int warmTokens) { kvHotTokens = hotTokens; kvWarmTokens = warmTokens; return this; }

        /** Entries never evicted: the first anchorTokens and the newest recentTokens. */
        public Builder kvKeep(int anchorTokens, int recentTokens) { kvAnchorTokens = anchorTokens; kvRecentTokens = recentTokens; return this; }

        /** The cold tier's bits: 4, 8 (no INT4 tier) or 16 (no quantization). */
        public Builder kvColdBits(int bits) { kvColdBits = bits; return this; }

        /** INT4 groups without a minimum (symmetric). */
        public Builder kvColdSymmetric(boolean on) { kvColdSymmetric = on ? 1 : 0; return this; }

        /** Quantized keys by token instead of by channel. */
        public Builder kvPerTokenKeys(boolean on) { kvPerTokenKeys = on ? 1 : 0; return this; }

        /** Spill to cacheDir: 0 where storage is fast, 1 always, -1 never. */
        public Builder kvSpill(int mode) { kvSpill = mode; return this; }

        /** The spill file's limit in bytes (0: what the disk holds). */
        public Builder kvSpillMaxBytes(long bytes) { kvSpillMaxBytes = bytes; return this; }

        /** The expert cache of an MoE model, in bytes (0: sized from the device). */
        public Builder moeCacheBytes(long bytes) { moeCacheBytes = bytes; return this; }

        /** The expert cache as a share (0, 1] of the model's expert bytes. */
        public Builder moeCacheShare(double share) { moeCacheShare = share; return this; }

        /** The expert cache's eviction by octo's name: "lhu", "lru", "lfu". */
        public Builder moePolicy(String name) { moePolicy = text(name); return this; }

        public Builder moePrefetch(Prefetch p) { moePrefetch = p.ordinal(); return this; }

        /** Read-ahead margin in standard deviations (0: default, < 0: top k only). */
        public Builder moePredictMargin(double sd) { moePredictMargin = sd; return this; }

        public Builder moeInt2(Int2 mode) { moeInt2 = mode.ordinal(); return this; }

        /** A file to write each token's experts to, per MoE layer (HIT, MISS, INT2). */
        public Builder moeTrace(String file) { moeTrace = text(file); return this; }

        /** Where octo's warnings go (Log.d/Log.w on Android); none by default. */
        public Builder log(Log log) {
            logSink = log == null ? null : (level, text) -> log.message(level, new String(text, StandardCharsets.UTF_8));
            return this;
        }

        /** Loads the model; OctoException with octo's message when it cannot. */
        public Model load() {
            return new Model(Native.load(utf8(path), this));
        }
    }

    private final State state;
    private final Cleaner.Cleanable cleanable;

    private Model(long handle) {
        state = new State(handle);
        cleanable = CLEANER.register(this, state);
    }

    public static Builder builder(String path) {
        return new Builder(path);
    }

    public static Model load(String path) {
        return builder(path).load();
    }

    /** f of the native model under its read lock, this Model reachable until f returns (no Cleaner meanwhile). */
    private <T> T read(LongFunction<T> f) {
        try {
            return state.read(f);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** read(f) with the model's call lock held (State.calls). */
    private <T> T call(LongFunction<T> f) {
        try {
            return state.call(f);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** A continuation of prompt on the model's own conversation; iterate it for the text's pieces. */
    public Stream generate(String prompt, GenerateOptions o) {
        return call(h -> new Stream(this, state.streams, start(h, 0, prompt, o), state.calls));
    }

    /**
     * The callback form: each piece to onPiece as it is made, on this thread. An exception onPiece
     * throws stops the generation cleanly and is rethrown here; close() from another thread stops
     * it before its next piece, and it ends with an IllegalStateException (the text is cut).
     */
    public void generate(String prompt, int maxTokens, float temperature, long seed, java.util.function.Consumer<String> onPiece) {
        call(h -> Native.generateEach(h, utf8(prompt), maxTokens, temperature, seed,
                b -> onPiece.accept(new String(b, StandardCharsets.UTF_8))));
    }

    /** generate with maxTokens, temperature (0: greedy) and seed, the rest the library's defaults. */
    public Stream generate(String prompt, int maxTokens, float temperature, long seed) {
        return generate(prompt, new GenerateOptions().maxTokens(maxTokens).temperature(temperature).seed(seed));
    }

    static long start(long model, long session, String prompt, GenerateOptions o) {
        return Native.generate(model, session, utf8(prompt), o.maxTokens, o.temperature, o.topK, o.topP, o.minP,
                o.repeatPenalty, o.seed, o.grammar == null ? null : utf8(o.grammar),
                o.jsonSchema == null ? null : utf8(o.jsonSchema));
    }

    /** A LoRA adapter (llama.cpp's adapter GGUF) read against this model; an OctoException says what is wrong with it. */
    public Adapter loadAdapter(String path) {
        return call(h -> {
            Adapter a = new Adapter(state, Native.adapterLoad(h, utf8(path)));
            synchronized (state.adapters) {
                state.adapters.add(a);
            }
            return a;
        });
    }

    /**
     * The adapters of the model's own conversation from its next generation, each at its scale (0 gives the
     * base's output exactly; none: the base alone). A different set empties the conversation's cache; not while it streams.
     */
    public void setAdapters(Adapter[] adapters, float[] scales) {
        call(h -> {
            setAdapters(state, h, 0, adapters, scales);
            return null;
        });
    }

    /** Under the adapters' lock: an Adapter.close on another thread cannot free a handle in between. */
    static void setAdapters(State state, long model, long session, Adapter[] adapters, float[] scales) {
        synchronized (state.adapters) {
            long[] hs = new long[adapters.length];
            for (int i = 0; i < hs.length; i++) {
                if (adapters[i].model != state) throw new IllegalArgumentException("an adapter of another model");
                hs[i] = adapters[i].handle();
            }
            Native.setAdapters(model, session, hs, scales);
        }
    }

    /** Another conversation on these weights, with its own KV cache (Builder.maxSessions bounds them). */
    public Session newSession() {
        return call(h -> new Session(this, state, Native.sessionNew(h)));
    }

    /**
     * The app's memory signal, as Android's ComponentCallbacks2.onTrimMemory gives it (a plain int):
     * RUNNING_MODERATE (5), UI_HIDDEN (20) and BACKGROUND (40) give back the packed weights and a
     * self-draft; RUNNING_LOW (10) and MODERATE (60) also halve the expert cache; RUNNING_CRITICAL
     * (15) and COMPLETE (80) also cut every KV cache to its anchors and recent window; 0 takes
     * back what was given. Safe from any thread, between two tokens of a running stream.
     */
    public void trim(int androidLevel) {
        int level;
        switch (androidLevel) {
            case 0: level = 0; break;
            case 5: case 20: case 40: level = 1; break;
            case 10: case 60: level = 2; break;
            case 15: case 80: level = 3; break;
            default: throw new IllegalArgumentException("not a ComponentCallbacks2 trim level: " + androidLevel);
        }
        read(h -> Native.trim(h, level));
    }

    /** What octo decided at load for this model on this device (octo_model_plan_json; `octo plan --json`). */
    public String planJson() {
        return call(h -> new String(Native.planJson(h), StandardCharsets.UTF_8));
    }

    /** The statistics of the model's own conversation and of the model (octo_model_stats). */
    public Stats stats() {
        return read(h -> Native.stats(h, 0));
    }

    /** The token ids of text, with BOS/EOS as the vocabulary says (octo_tokenize); special-token text stays text. */
    public int[] tokenize(String text) {
        return call(h -> Native.tokenize(h, utf8(text)));
    }

    /** The text of token ids (octo_detokenize): detokenize(tokenize(text)) is text. */
    public String detokenize(int[] ids) {
        return call(h -> new String(Native.detokenize(h, ids), StandardCharsets.UTF_8));
    }

    /** octo's version, e.g. "0.1.0". */
    public static String version() {
        return Native.version();
    }

    /**
     * Frees the model, its sessions and its streams (a stream running on another thread is
     * cancelled, and its next call is an IllegalStateException); a second call does nothing. Not from inside this model's own
     * callback (generate's onPiece, the log while it generates): that is an IllegalStateException.
     */
    @Override
    public void close() {
        if (state.lock.getReadHoldCount() > 0)
            throw new IllegalStateException("close() from inside this model's own callback: return from it first");
        cleanable.clean();
    }

    static byte[] utf8(String s) {
        if (s == null) throw new NullPointerException("a null string");
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
