/*
 * adapt — what octo gives back when the device runs short of memory, in
 * order of cost, and what it takes again when memory is back.
 *
 *   level      the app's signal (octo_model_trim)       given back                                  lossless
 *   low        Android RUNNING_MODERATE, UI_HIDDEN,      the packed weights go back to the file's    yes
 *              BACKGROUND                                pages (model_unpack); a self-draft copy
 *                                                        is dropped once no stream uses it; LoRA
 *                                                        adapters no conversation holds are freed
 *                                                        (read from their file again when set)
 *   moderate   Android RUNNING_LOW                       + the expert cache to half its shared       yes
 *                                                        bytes (at least a token's experts), no
 *                                                        read-ahead
 *   critical   Android RUNNING_CRITICAL, COMPLETE;       + every KV cache: entries out of the hot    no: colder,
 *              iOS's memory warning                      window to the cold tier, then its floor     then evicts
 *                                                        (anchors and recent window; spilling first
 *                                                        where the plan spills); experts to a token's
 *   none       memory is back                            each step undone, last first; the weights
 *                                                        packed again only when the memory that can
 *                                                        still be had holds them with a margin
 *
 * Two signals set the level, and the higher one rules: the app's
 * (octo_model_trim, at once, both ways) and the memory watcher's
 * (platform/memwatch.h), which raises it at once but lowers it only after
 * ADAPT_CALM_S seconds without pressure, so that giving back and taking
 * again do not alternate with each pass. Everything here runs between
 * tokens, under the model's lock: no forward pass sees a matrix change
 * layout under it.
 */
#ifndef OCTO_RUNTIME_ADAPT_H
#define OCTO_RUNTIME_ADAPT_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/bundle.h"
#include "runtime/session.h"

#define ADAPT_LEVELS 4
#define ADAPT_CALM_S 5.0

typedef struct {
    int level;               /* in force */
    int app_level;           /* the app's last octo_model_trim */
    int watch_level;         /* the watcher's, after hysteresis */
    double last_pressure_s;  /* when the watcher last saw a level above none */
    int last_seen;           /* the watcher's last report */
    double last_retry_s;     /* when what waited was last tried again */
    unsigned trims;          /* raises of the level in force */
    unsigned regrows;        /* lowerings */
    unsigned events;         /* watcher reports of pressure after none (the pressure events) */
    uint64_t released_weights, released_draft, released_experts, released_kv, released_adapters; /* bytes, summed */
    bool weights_unpacked;   /* packed weights given back and not packed again yet */
    bool draft_pending;      /* a self-draft to drop when no stream uses it */
    double last_change_s;    /* when the level in force last changed */
    char note[200];          /* the last decision, and why */
} adapt_state;

/* What adapt acts on: the bundle and every open session's caches (the
 * model's and its draft's). idle: no stream is alive, so a self-draft may
 * go; drop_draft frees it from every session and the bundle. room: memory
 * the process could still get, its reclaimable file pages counted
 * (platform/mem.h), for deciding to pack the weights again. */
typedef struct {
    bundle *b;
    session **s;
    int n;
    bool idle;
    void (*drop_draft)(void *user);
    uint64_t (*drop_adapters)(void *user); /* the adapters no conversation holds: their memory freed (read
                                              again when set); the bytes given back */
    void *user;
    uint64_t room;
} adapt_target;

/* The app's level (0..3) from now on; applied at once. */
void adapt_app(adapt_state *a, const adapt_target *t, int level, double now_s);
/* The watcher's report of level seen (0..3) at now_s; applied at once
 * when it raises the level, after ADAPT_CALM_S of none when it lowers it.
 * Also retries what waited (a draft in use, weights that did not fit). */
void adapt_watch(adapt_state *a, const adapt_target *t, int seen, double now_s);
/* Would adapt_watch act at now_s on a report of seen? (cheap, no lock:
 * the watcher asks before taking the model's lock) */
bool adapt_watch_acts(const adapt_state *a, int seen, double now_s);

/* What `level` would give back of this bundle as planned, in one line
 * (octo plan). */
void adapt_describe(const bundle *b, int level, char *buf, size_t n);

#endif
