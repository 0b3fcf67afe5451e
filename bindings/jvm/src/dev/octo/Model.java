package dev.octo;

import java.lang.ref.Cleaner;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.ReentrantReadWriteLock;

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
        long handle;

        State(long handle) {
            this.handle = handle;
        }

        long handle() {
            if (handle == 0) throw new IllegalStateException("the model is closed");
            return handle;
        }

        @Override
        public void run() {
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
            lock.writeLock().lock();
            try {
                if (handle != 0) Native.freeModel(handle);
                handle = 0;
            } finally {
                lock.writeLock().unlock();
            }
        }
    }

    /**
     * Options of octo_model_options / octo_client_options; 0 and null mean automatic, as in C.
     * octo checks them at load: a bad one is an OctoException with octo's message.
     */
    public static final class Builder {
        private final String path;
        private int nCtx, threads, maxSessions, autoDraft, draftThreads, memoryWatch;
        private long moeCacheBytes;
        private String draft, device, cacheDir;

        Builder(String path) {
            this.path = path;
        }

        public Builder contextLength(int n) { this.nCtx = n; return this; }

        public Builder threads(int n) { this.threads = n; return this; }

        public Builder maxSessions(int n) { this.maxSessions = n; return this; }

        public Builder draftModel(String path) { this.draft = path; return this; }

        public Builder device(String name) { this.device = name; return this; }

        /** A draft found or made by itself: 0 automatic, -1 none, 1 a Q4_0 self-draft (octo_model_options.auto_draft). */
        public Builder autoDraft(int mode) { this.autoDraft = mode; return this; }

        /** Cores of the draft's own (0: automatic). */
        public Builder draftThreads(int n) { this.draftThreads = n; return this; }

        /** Where the KV cache may spill to flash (null: no spill). */
        public Builder cacheDir(String dir) { this.cacheDir = dir; return this; }

        /** The memory watcher: 0 automatic, -1 off (trim still works). */
        public Builder memoryWatch(int mode) { this.memoryWatch = mode; return this; }

        /** The expert cache of an MoE model, in bytes (0: sized from the device). */
        public Builder moeCacheBytes(long bytes) { this.moeCacheBytes = bytes; return this; }

        /** Loads the model; OctoException with octo's message when it cannot. */
        public Model load() {
            return new Model(Native.load(utf8(path), nCtx, threads, draft == null ? null : utf8(draft), maxSessions,
                    device == null ? null : utf8(device), autoDraft, draftThreads, cacheDir == null ? null : utf8(cacheDir),
                    memoryWatch, moeCacheBytes));
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

    /** A continuation of prompt on the model's own conversation; iterate it for the text's pieces. */
    public Stream generate(String prompt, GenerateOptions o) {
        state.lock.readLock().lock();
        try {
            return new Stream(this, state.streams, start(state.handle(), 0, prompt, o));
        } finally {
            state.lock.readLock().unlock();
        }
    }

    /**
     * The callback form: each piece to onPiece as it is made, on this thread. An exception onPiece
     * throws stops the generation cleanly and is rethrown here.
     */
    public void generate(String prompt, int maxTokens, float temperature, long seed, java.util.function.Consumer<String> onPiece) {
        state.lock.readLock().lock();
        try {
            Native.generateEach(state.handle(), utf8(prompt), maxTokens, temperature, seed,
                    b -> onPiece.accept(new String(b, StandardCharsets.UTF_8)));
        } finally {
            state.lock.readLock().unlock();
        }
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

    /** Another conversation on these weights, with its own KV cache (Builder.maxSessions bounds them). */
    public Session newSession() {
        state.lock.readLock().lock();
        try {
            return new Session(this, state, Native.sessionNew(state.handle()));
        } finally {
            state.lock.readLock().unlock();
        }
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
        state.lock.readLock().lock();
        try {
            Native.trim(state.handle(), level);
        } finally {
            state.lock.readLock().unlock();
        }
    }

    /** The statistics of the model's own conversation and of the model (octo_model_stats). */
    public Stats stats() {
        state.lock.readLock().lock();
        try {
            return Native.stats(state.handle(), 0);
        } finally {
            state.lock.readLock().unlock();
        }
    }

    /** octo's version, e.g. "0.1.0". */
    public static String version() {
        return Native.version();
    }

    /** Frees the model and its streams; a second call does nothing. */
    @Override
    public void close() {
        cleanable.clean();
    }

    static byte[] utf8(String s) {
        if (s == null) throw new NullPointerException("a null string");
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
