package dev.octo;

/**
 * Training a LoRA adapter on the device (octo.h: octo_finetune; docs/training.md): a model file, a
 * text file, a folder of them or a .jsonl of {"messages": [...]} conversations (the assistants'
 * turns learnt), and the adapter written in llama.cpp's format (Model.loadAdapter reads it).
 *
 * <pre>
 * Finetune.Result r = new Finetune("model.gguf", "notes.txt", "notes-lora.gguf").steps(200).run();
 * </pre>
 *
 * A Progress given to progress() sees each step; returning true stops the run after it, with its
 * checkpoint written (OctoException, status 22): run() again resumes it, to the same bytes.
 */
public final class Finetune {
    /** One step's figures. */
    public record Step(long step, long steps, double loss, double lr, double gradNorm, long tokens, double elapsedS,
            double tokensPerS, double etaS, long resumedAt) {}

    /** Called after each step, on the thread that called run(); true stops the run. */
    @FunctionalInterface
    public interface Progress {
        boolean step(Step s);
    }

    /** What a run did (octo_finetune_result). validBefore and validAfter are NaN without held-out data; experts and
     * expertsReached: a mixture of experts' (layers x experts) and those any training token reached (0, 0: dense). */
    public record Result(long resumedAt, long stepsRun, double firstLoss, double lastLoss, double validBefore,
            double validAfter, double seconds, long sequences, long tokens, long counted, int conversations,
            int conversationsCut, int matrices, long adapterValues, boolean full, int experts, int expertsReached) {}

    private final String model, data, output;
    private String valid, checkpoint, targets, type, distill;
    private int full;
    private int steps = 100, batch = 4, seqLen = 256, rank = 16, warmup = -1, checkpointEvery = 10;
    private boolean restart;
    private float alpha = 32f, lr = 1e-3f, lrMin = 1e-4f, clip = 1f, weightDecay = 0.01f;
    private long seed = 1;
    private Progress progress;

    public Finetune(String model, String data, String output) {
        this.model = java.util.Objects.requireNonNull(model, "model");
        this.data = java.util.Objects.requireNonNull(data, "data");
        this.output = java.util.Objects.requireNonNull(output, "output");
    }

    public Finetune valid(String path) { valid = path; return this; }
    public Finetune checkpoint(String path) { checkpoint = path; return this; }
    /** Comma-separated: q,k,v,o,gate,up,down,router (the default: the first seven; router: a mixture of experts'). */
    public Finetune targets(String names) { targets = names; return this; }
    /** f32 (the default), f16, bf16 or q8_0. */
    public Finetune type(String name) { type = name; return this; }
    public Finetune steps(int n) { steps = n; return this; }
    public Finetune batch(int n) { batch = n; return this; }
    public Finetune seqLen(int n) { seqLen = n; return this; }
    public Finetune rank(int r) { rank = r; return this; }
    public Finetune alpha(float a) { alpha = a; return this; }
    public Finetune lr(float peak, float floor) { lr = peak; lrMin = floor; return this; }
    /** Steps of linear warm-up (the default: a tenth of the steps, at most 100). */
    public Finetune warmup(int n) { warmup = n; return this; }
    public Finetune clip(float norm) { clip = norm; return this; }
    public Finetune weightDecay(float d) { weightDecay = d; return this; }
    public Finetune seed(long s) { seed = s; return this; }
    public Finetune checkpointEvery(int n) { checkpointEvery = n; return this; }
    /** Ignore an existing checkpoint: start over. */
    public Finetune restart(boolean r) { restart = r; return this; }
    /** Learn the target model's next-token distributions (KL) instead of the data's next tokens: a draft for it. */
    public Finetune distill(String target) { distill = target; return this; }
    /** true: train every weight and write a whole model; false: an adapter (default: every weight when distilling
     * a model of at most 64 M parameters). */
    public Finetune full(boolean all) { full = all ? 1 : -1; return this; }
    public Finetune progress(Progress p) { progress = p; return this; }

    private static byte[] optional(String s) {
        return s == null ? null : Model.utf8(s);
    }

    /** Trains and writes the adapter; OctoException with octo's status and message on failure. */
    public Result run() {
        byte[][] texts = {Model.utf8(model), Model.utf8(data), optional(valid), Model.utf8(output), optional(checkpoint),
            optional(targets), optional(type), optional(distill)};
        int[] ints = {steps, batch, seqLen, rank, warmup, checkpointEvery, restart ? 1 : 0, full};
        float[] floats = {alpha, lr, lrMin, clip, weightDecay};
        final Progress p = progress;
        Native.StepSink sink = p == null ? null
                : (step, all, loss, rate, norm, tokens, elapsed, tps, eta, resumed) ->
                        p.step(new Step(step, all, loss, rate, norm, tokens, elapsed, tps, eta, resumed));
        double[] v = Native.finetune(texts, ints, floats, seed, sink);
        return new Result((long) v[0], (long) v[1], v[2], v[3], v[4], v[5], v[6], (long) v[7], (long) v[8],
                (long) v[9], (int) v[10], (int) v[11], (int) v[12], (long) v[13], v[14] != 0, (int) v[15], (int) v[16]);
    }
}
