/*
 * simple — the whole promise of octo in one file: load a model, stream a
 * continuation, print the stats. Every optimization is chosen by the library.
 *
 *   simple MODEL.gguf "Once upon a time"
 */
#include <stdio.h>

#include "octo.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT\n", argv[0]);
        return 2;
    }
    octo_client *client = octo_client_new(NULL);
    octo_model *model = octo_load_model(client, argv[1], NULL);
    if (!model) {
        fprintf(stderr, "simple: %s\n", octo_last_error(client));
        octo_client_free(client);
        return 1;
    }
    octo_stream *stream = octo_generate(model, argv[2], NULL);
    if (!stream) {
        fprintf(stderr, "simple: %s\n", octo_model_error(model));
        octo_model_free(model);
        octo_client_free(client);
        return 1;
    }
    for (const char *piece; (piece = octo_stream_next(stream));) fputs(piece, stdout);
    int failed = octo_stream_status(stream) != OCTO_OK;
    if (failed) fprintf(stderr, "\nsimple: %s\n", octo_stream_error(stream));
    octo_stream_free(stream);
    octo_stats stats = octo_model_stats(model);
    printf("\n[%d prompt tokens, %d generated at %.1f tokens/s, peak RSS %.1f MiB]\n", stats.prompt_tokens,
           stats.decode_tokens, stats.decode_tokens_per_s, stats.peak_rss_bytes / 1048576.0);
    octo_model_free(model);
    octo_client_free(client);
    return failed;
}
