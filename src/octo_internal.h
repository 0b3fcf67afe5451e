/*
 * octo_internal — what src/octo.c shares with the api's other files
 * (src/octo_*.c): nothing of it is public.
 */
#ifndef OCTO_INTERNAL_H
#define OCTO_INTERNAL_H

#include "octo.h"
#include "core/err.h"

/* This thread's error record for client c, cleared for a new call (octo_last_error reads it). */
err_t *api_client_err(const octo_client *c);

#endif
