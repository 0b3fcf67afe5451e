/*
 * octo — the command line: which command runs, `octo help` and -h, the
 * version, and the temporary files an interrupted command leaves.
 *
 *   octo run        -m MODEL -p PROMPT [-n N] [sampling] [--chat] [--ids] [--stats]   run.c, chat.c
 *   octo tokenize   -m MODEL (--text T | -f FILE) [--no-bos]                          tokenize.c
 *   octo detokenize -m MODEL --ids "1 2 3"                                            tokenize.c
 *   octo inspect    -m MODEL [--kv-tokens N]     what a model is and what it costs    inspect.c
 *   octo logits     -m MODEL (--tokens "1 2 3" | --prompt TEXT) --out FILE.f32        logits.c
 *   octo synth      -o FILE [shape and type options]                                  synth.c
 *   octo pull REF, list, rm REF   models from the hub or a URL into a cache            pull.c
 *   octo bench, eval, upcycle, moe-prep, quantize, plan, deploy, serve: the file of that name
 *   (moe-prep: moe_prep.c)
 *
 * options.c: every command's options, one table, and the parser they share;
 * help.c: the help and the answer to an option a command does not take.
 *
 * Every failure is one line on stderr ("octo: ...") and a non-zero exit:
 * 1 for an error of the operation, 2 for a usage error.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "octo.h"
#include "cli.h"
#include "help.h"
#include "pull.h"
#include "core/tempfiles.h" /* internal: what an interrupted command removes */

#ifndef OCTO_HAVE_SERVE
int cmd_serve(int argc, char **argv) {
    (void)argc, (void)argv;
    return fail("serve: this octo was built without libmicrohttpd and cJSON (scripts/setup.sh installs them)");
}
#endif

/* An interrupted or terminated command removes the temporary files and
 * folders it named (core/tempfiles.h), then dies of the signal as it would
 * have. run and serve put their own handlers over this one. */
static void on_interrupt(int sig) {
    tempfiles_remove_all(); /* async-signal-safe */
    signal(sig, SIG_DFL);
    raise(sig);
}

static void remove_temporaries_on_interrupt(void) {
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        struct sigaction sa, was;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_interrupt;
        if (sigs[i] == SIGHUP && sigaction(SIGHUP, NULL, &was) == 0 && was.sa_handler == SIG_IGN)
            continue; /* under nohup: a hang-up is not the end */
        sigaction(sigs[i], &sa, NULL);
    }
}

int main(int argc, char **argv) {
    remove_temporaries_on_interrupt();
    cli_resolve_model = pull_model_path; /* -m and --draft take a hub reference or a URL (pull.h) */
    if (argc >= 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version"))) {
        printf("octo %s\n", octo_version());
        return finish_stdout(0);
    }
    if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        help(argc < 2 ? stderr : stdout);
        return finish_stdout(argc < 2 ? 2 : 0);
    }
    /* each command's function, in cli_command's order (options.h) */
    static int (*const run[CMD_COUNT])(int argc, char **argv) = {
        cmd_run,    cmd_tokenize, cmd_detokenize, cmd_inspect,  cmd_bench, cmd_eval,   cmd_logits,
        cmd_synth,  cmd_upcycle,  cmd_moe_prep,   cmd_quantize, cmd_merge, cmd_finetune, cmd_fedavg, cmd_plan,  cmd_deploy, cmd_serve,
        cmd_pull,   cmd_list,     cmd_rm,
    };
    for (int c = 0; c < CMD_COUNT; c++) {
        if (strcmp(argv[1], cli_command_name((cli_command)c))) continue;
        for (int k = 2; k < argc; k++) /* -h / --help anywhere: this command's help */
            if (!strcmp(argv[k], "-h") || !strcmp(argv[k], "--help")) return help_for((cli_command)c);
        return finish_stdout(run[c](argc - 2, argv + 2));
    }
    return unknown_command(argv[1]);
}
