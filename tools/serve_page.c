/*
 * serve_page — GET /: the chat page, tools/serve_page.html, which CMake
 * embeds as bytes (serve_page_data.h in the build folder) so the binary
 * serves it with no file beside it.
 */
#include <microhttpd.h>
#include <string.h>

#include "serve.h"
#include "generated/serve_page_data.h" /* from tools/serve_page.html: serve_page_html[], NUL-terminated */

struct MHD_Response *serve_page(void) {
    const size_t n = sizeof serve_page_html - 1;
    struct MHD_Response *r = MHD_create_response_from_buffer(n, (void *)serve_page_html, MHD_RESPMEM_PERSISTENT);
    if (r) {
        MHD_add_response_header(r, "Content-Type", "text/html; charset=utf-8");
        MHD_add_response_header(r, "Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'");
    }
    return r;
}
