package dev.octo;

import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * A conversation of its own on a model's weights (octo_session): its own KV cache, one stream at a
 * time. Sessions may generate on different threads at once. Closed by close(), with its model, or
 * by a Cleaner; its streams are closed with it.
 */
public final class Session implements AutoCloseable {
    static final class State implements Runnable {
        final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
        final List<Stream.State> streams = new ArrayList<>();
        final Model.State model;
        long handle;

        State(Model.State model, long handle) {
            this.model = model;
            this.handle = handle;
        }

        long handle() {
            if (handle == 0) throw new IllegalStateException("the session is closed");
            return handle;
        }

        /** Closes (from close(), its Cleaner or its model's close; a second time does nothing): the
         * write lock waits for calls in progress, the handle 0 lets nothing new start, its streams
         * are freed (a next() on another thread is cancelled and waited for), then the session. */
        @Override
        public void run() {
            lock.writeLock().lock();
            try {
                final long h = handle;
                handle = 0;
                List<Stream.State> open;
                synchronized (streams) {
                    open = new ArrayList<>(streams);
                }
                for (Stream.State s : open) s.run();
                if (h != 0) Native.sessionFree(h);
            } finally {
                lock.writeLock().unlock();
            }
            synchronized (model.sessions) {
                model.sessions.remove(this);
            }
        }
    }

    private final Model owner; /* reachable while the session is */
    private final State state;
    private final Cleaner.Cleanable cleanable;

    Session(Model owner, Model.State model, long handle) {
        this.owner = owner;
        this.state = new State(model, handle);
        synchronized (model.sessions) {
            model.sessions.add(state);
        }
        cleanable = Model.CLEANER.register(this, state);
    }

    /** A native session's call. */
    private interface Call<T> {
        T apply(long model, long session);
    }

    /**
     * f of the native model and session under the model's read lock, then the session's (the order
     * Model.close takes them in), this Session reachable until f returns.
     */
    private <T> T read(Call<T> f) {
        try {
            return state.model.read(m -> {
                state.lock.readLock().lock();
                try {
                    return f.apply(m, state.handle());
                } finally {
                    state.lock.readLock().unlock();
                }
            });
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** A continuation of prompt in this conversation. */
    public Stream generate(String prompt, GenerateOptions o) {
        return read((m, s) -> new Stream(this, state.streams, Model.start(m, s, prompt, o), null));
    }

    /** generate with maxTokens, temperature (0: greedy) and seed, the rest the library's defaults. */
    public Stream generate(String prompt, int maxTokens, float temperature, long seed) {
        return generate(prompt, new GenerateOptions().maxTokens(maxTokens).temperature(temperature).seed(seed));
    }

    /** This session's statistics: its generation, its caches; the model's for the rest (octo_session_stats). */
    public Stats stats() {
        return read(Native::stats);
    }

    /** This conversation's adapters and their scales (Model.setAdapters). */
    public void setAdapters(Adapter[] adapters, float[] scales) {
        read((m, s) -> {
            Model.setAdapters(state.model, m, s, adapters, scales);
            return null;
        });
    }

    /** Forgets the conversation (its cache emptied); not while it streams. */
    public void reset() {
        read((m, s) -> {
            Native.sessionReset(s);
            return null;
        });
    }

    @Override
    public void close() {
        cleanable.clean();
    }

    Model model() {
        return owner;
    }
}
