/*
 * random — bytes from the system's generator (/dev/urandom on Linux, Android,
 * macOS and iOS alike), for what must not be predictable: the noise a
 * differentially private update adds (train/fed.h). Not for what must repeat
 * (the data order, an adapter's start: those are seeded).
 */
#ifndef OCTO_PLATFORM_RANDOM_H
#define OCTO_PLATFORM_RANDOM_H

#include <stddef.h>

#include "core/err.h"

/* n bytes into buf; ERR_IO when the generator cannot be read. */
err_code plat_random(void *buf, size_t n, err_t *err);

#endif
