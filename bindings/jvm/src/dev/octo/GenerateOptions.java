package dev.octo;

/**
 * The sampling of one generation, as octo_generate_params (octo.h) has it; its defaults are the
 * library's. A fixed seed repeats the text; temperature 0 is greedy.
 */
public final class GenerateOptions {
    int maxTokens = 256;
    float temperature = 0.8f;
    int topK = 40;
    float topP = 0.95f;
    float minP = 0.05f;
    float repeatPenalty = 1.0f;
    long seed;
    String grammar, jsonSchema;

    public GenerateOptions maxTokens(int n) { maxTokens = n; return this; }

    public GenerateOptions temperature(float t) { temperature = t; return this; }

    public GenerateOptions topK(int k) { topK = k; return this; }

    public GenerateOptions topP(float p) { topP = p; return this; }

    public GenerateOptions minP(float p) { minP = p; return this; }

    public GenerateOptions repeatPenalty(float r) { repeatPenalty = r; return this; }

    public GenerateOptions seed(long s) { seed = s; return this; }

    /** The text follows a GBNF grammar (llama.cpp's format). */
    public GenerateOptions grammar(String gbnf) { grammar = gbnf; return this; }

    /** The text is JSON valid against the schema (docs/structured-output.md). */
    public GenerateOptions jsonSchema(String schema) { jsonSchema = schema; return this; }
}
