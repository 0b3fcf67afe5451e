/*
 * random — the system's generator (platform/random.h).
 */
#include "platform/random.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

err_code plat_random(void *buf, size_t n, err_t *err) {
    const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return err_set(err, ERR_IO, "/dev/urandom: %s", strerror(errno));
    size_t got = 0;
    while (got < n) {
        const ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    return got == n ? ERR_OK : err_set(err, ERR_IO, "/dev/urandom gave %zu of %zu bytes", got, n);
}
