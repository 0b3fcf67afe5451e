/*
 * help — `octo help`, each command's -h, and the answer to an option a
 * command does not take (tools/help.c).
 */
#ifndef OCTO_TOOLS_HELP_H
#define OCTO_TOOLS_HELP_H

#include <stdio.h>

#include "options.h"

/* The whole help: `octo help` (stdout), `octo` alone (stderr). */
void help(FILE *f);
/* cmd's entries of the help, each line with its newline, the expert cache's
 * whole too for a command that takes its options; malloc'd, NULL when out of memory. */
char *help_entry(cli_command cmd);
/* `octo CMD -h`: help_entry on stdout; the exit code. */
int help_for(cli_command cmd);
/* "CMD: unknown option 'ARG' (did you mean --flag?)", the nearest of the
 * options cmd takes (options.c); a usage error, 2. */
int unknown_option(cli_command cmd, const char *arg);
/* The usage error for a command octo does not have, naming the nearest one when it is near. */
int unknown_command(const char *name);

#endif
