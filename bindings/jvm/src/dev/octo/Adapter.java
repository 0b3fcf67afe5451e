package dev.octo;

/**
 * A LoRA adapter (llama.cpp's adapter GGUF) read against a Model (Model.loadAdapter), for
 * Model.setAdapters and Session.setAdapters. close() gives the handle up: a conversation still
 * using it keeps it until it sets others. The model's close frees what is left.
 */
public final class Adapter implements AutoCloseable {
    final Model.State model;
    long handle; /* 0 once closed; under the model's lock */

    Adapter(Model.State model, long handle) {
        this.model = model;
        this.handle = handle;
    }

    long handle() {
        if (handle == 0) throw new IllegalStateException("the adapter is closed");
        return handle;
    }

    @Override
    public void close() {
        synchronized (model.adapters) {
            if (handle == 0 || !model.adapters.remove(this)) return;
            final long h = handle;
            handle = 0;
            Native.adapterFree(h);
        }
    }
}
