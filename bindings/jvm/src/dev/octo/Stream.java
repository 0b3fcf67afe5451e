package dev.octo;

import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.nio.charset.StandardCharsets;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.Consumer;

/**
 * The text of one generation, piece by piece: an Iterator (for (String piece : stream)) or
 * forEachPiece with a callback. cancel() may be called from any thread; the stream then ends.
 * Close it, or let it end: the native stream is freed at its end, on close, with its model, or by
 * a Cleaner.
 */
public final class Stream implements Iterator<String>, Iterable<String>, AutoCloseable {
    /** The native stream; next and cancel share its lock, freeing takes it alone. */
    static final class State implements Runnable {
        final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
        final List<State> registry; /* the open streams of its model or session */
        long handle;

        State(List<State> registry, long handle) {
            this.registry = registry;
            this.handle = handle;
        }

        void cancel() {
            lock.readLock().lock();
            try {
                if (handle != 0) Native.cancel(handle);
            } finally {
                lock.readLock().unlock();
            }
        }

        @Override
        public void run() {
            cancel(); /* a next() running on another thread returns soon */
            lock.writeLock().lock();
            try {
                if (handle != 0) Native.freeStream(handle);
                handle = 0;
            } finally {
                lock.writeLock().unlock();
            }
            synchronized (registry) {
                registry.remove(this);
            }
        }
    }

    private final Object owner; /* its Model or Session: reachable while the stream is */
    private final Object calls; /* the model's call lock for a stream of the model's own conversation (Model.State.calls), else null */
    private final State state;
    private final Cleaner.Cleanable cleanable;
    private String ahead;
    private boolean done;
    private volatile int stopReason = -1;

    Stream(Object owner, List<State> registry, long handle, Object calls) {
        this.owner = owner;
        this.calls = calls;
        this.state = new State(registry, handle);
        synchronized (registry) {
            registry.add(state);
        }
        cleanable = Model.CLEANER.register(this, state);
    }

    @Override
    public synchronized boolean hasNext() {
        if (ahead != null) return true;
        if (done) return false;
        byte[] piece;
        state.lock.readLock().lock();
        try {
            if (state.handle == 0) throw new IllegalStateException("the stream is closed");
            if (calls == null) piece = step();
            else synchronized (calls) {
                piece = step();
            }
        } finally {
            state.lock.readLock().unlock();
            Reference.reachabilityFence(this); /* no Cleaner cancels it while next() runs */
        }
        if (piece == null) {
            done = true;
            close();
            return false;
        }
        ahead = new String(piece, StandardCharsets.UTF_8);
        return true;
    }

    /** One token's piece, null at the end (its reason kept); OctoException on a failure. */
    private byte[] step() {
        byte[] piece = Native.next(state.handle);
        if (piece == null) stopReason = Native.stopReason(state.handle);
        return piece;
    }

    @Override
    public synchronized String next() {
        if (!hasNext()) throw new NoSuchElementException();
        String p = ahead;
        ahead = null;
        return p;
    }

    @Override
    public Iterator<String> iterator() {
        return this;
    }

    /** Each piece to onPiece; an exception it throws cancels the generation and is rethrown. */
    public void forEachPiece(Consumer<String> onPiece) {
        try {
            while (hasNext()) onPiece.accept(next());
        } catch (RuntimeException | Error e) {
            close();
            throw e;
        }
    }

    /** The whole text, to its end. */
    public String text() {
        StringBuilder b = new StringBuilder();
        forEachPiece(b::append);
        return b.toString();
    }

    /** Ends the stream from any thread: the generation stops before its next token. */
    public void cancel() {
        state.cancel();
    }

    /** Why it ended (octo_stop_reason: 1 end of text, 2 max tokens, 3 cancelled, 4 context full); -1 while it runs. */
    public int stopReason() {
        return stopReason;
    }

    @Override
    public void close() {
        cleanable.clean();
    }

}
