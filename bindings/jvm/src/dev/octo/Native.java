package dev.octo;

/**
 * The native methods (bindings/jvm/jni/octo_jni.c), one per call of octo.h. The library is
 * liboctojni.so, found through the system property octo.jni (its path) or java.library.path.
 */
final class Native {
    static {
        String path = System.getProperty("octo.jni");
        if (path != null) System.load(path);
        else System.loadLibrary("octojni");
    }

    private Native() {}

    /** The options are read from b's fields by name (octo_jni.c's model_fields). */
    static native long load(byte[] path, Model.Builder b);

    static native byte[] planJson(long model);

    static native int[] tokenize(long model, byte[] text);

    static native byte[] detokenize(long model, int[] ids);

    /** Tells a generateEach running on the model to stop before its next piece (Model.close). */
    static native void stopEach(long model);

    static native void freeModel(long model);

    static native long generate(long model, long session, byte[] prompt, int maxTokens, float temperature, int topK,
            float topP, float minP, float repeatPenalty, long seed, byte[] grammar, byte[] jsonSchema);

    /** Each piece's UTF-8 bytes to sink.accept on this thread; an exception it throws stops the generation. */
    interface PieceSink {
        void accept(byte[] piece);
    }

    static native int generateEach(long model, byte[] prompt, int maxTokens, float temperature, long seed, PieceSink sink);

    /** A log message's level (octo_log_level) and UTF-8 text, to Model.Log. */
    interface LogSink {
        void message(int level, byte[] text);
    }

    static native long sessionNew(long model);

    static native void sessionFree(long session);

    static native void sessionReset(long session);

    static native int trim(long model, int level);

    static native long adapterLoad(long model, byte[] path);

    /** Finetune.run's progress: true stops the run. */
    interface StepSink {
        boolean step(long step, long steps, double loss, double lr, double gradNorm, long tokens, double elapsedS,
                double tokensPerS, double etaS, long resumedAt);
    }

    /** octo_jni.c's Java_dev_octo_Native_finetune says the arrays' order. */
    static native double[] finetune(byte[][] texts, int[] ints, float[] floats, long seed, StepSink sink);

    static native void adapterFree(long adapter);

    /** session 0: the model's own conversation. */
    static native void setAdapters(long model, long session, long[] adapters, float[] scales);

    static native byte[] next(long stream);

    static native int stopReason(long stream);

    static native void cancel(long stream);

    static native void freeStream(long stream);

    static native Stats stats(long model, long session);

    static native String version();
}
