/*
 * help — `octo help` and each command's -h (tools/help.c; unknown_option,
 * declared in cli.h, is there too).
 */
#ifndef OCTO_TOOLS_HELP_H
#define OCTO_TOOLS_HELP_H

#include <stdio.h>

/* The whole help: `octo help` (stdout), `octo` alone (stderr). */
void help(FILE *f);
/* `octo CMD -h`: cmd's entries of the help on stdout; the exit code. */
int help_for(const char *cmd);

#endif
