package dev.octo;

import java.lang.ref.Cleaner;
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

        @Override
        public void run() {
            List<Stream.State> open;
            synchronized (streams) {
                open = new ArrayList<>(streams);
            }
            for (Stream.State s : open) s.run();
            lock.writeLock().lock();
            try {
                if (handle != 0) Native.sessionFree(handle);
                handle = 0;
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

    /** A continuation of prompt in this conversation. */
    public Stream generate(String prompt, GenerateOptions o) {
        state.lock.readLock().lock();
        try {
            return new Stream(this, state.streams, Model.start(state.model.handle(), state.handle(), prompt, o));
        } finally {
            state.lock.readLock().unlock();
        }
    }

    /** generate with maxTokens, temperature (0: greedy) and seed, the rest the library's defaults. */
    public Stream generate(String prompt, int maxTokens, float temperature, long seed) {
        return generate(prompt, new GenerateOptions().maxTokens(maxTokens).temperature(temperature).seed(seed));
    }

    /** This session's statistics: its generation, its caches; the model's for the rest (octo_session_stats). */
    public Stats stats() {
        state.lock.readLock().lock();
        try {
            return Native.stats(state.model.handle(), state.handle());
        } finally {
            state.lock.readLock().unlock();
        }
    }

    /** Forgets the conversation (its cache emptied); not while it streams. */
    public void reset() {
        state.lock.readLock().lock();
        try {
            Native.sessionReset(state.handle());
        } finally {
            state.lock.readLock().unlock();
        }
    }

    @Override
    public void close() {
        cleanable.clean();
    }

    Model model() {
        return owner;
    }
}
