/* A program outside the tree, built against an installed octo (tests/install.sh):
 * prints the library's version, and with a model, streams a few greedy tokens. */
#include <octo.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (strcmp(octo_version(), OCTO_VERSION) != 0) {
        fprintf(stderr, "header %s, library %s\n", OCTO_VERSION, octo_version());
        return 1;
    }
    printf("octo %s\n", octo_version());
    if (argc < 2) return 0;
    octo_client *c = octo_client_new(NULL);
    octo_model *m = octo_load_model(c, argv[1], NULL);
    if (!m) {
        fprintf(stderr, "%s\n", octo_last_error(c));
        return 1;
    }
    octo_generate_params p = octo_generate_params_defaults();
    p.temperature = 0;
    p.max_tokens = 8;
    octo_stream *s = octo_generate(m, "Once upon a time", &p);
    for (const char *piece; s && (piece = octo_stream_next(s));) fputs(piece, stdout);
    putchar('\n');
    const int ok = s && octo_stream_status(s) == OCTO_OK;
    octo_stream_free(s);
    octo_model_free(m);
    octo_client_free(c);
    return ok ? 0 : 1;
}
