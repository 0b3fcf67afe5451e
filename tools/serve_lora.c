/*
 * serve_lora — the server's adapters, as llama-server has them: GET
 * /lora-adapters lists the --lora files with their ids and scales; POST
 * /lora-adapters sets the scales every request runs with ([{"id": 0,
 * "scale": 0.5}, ...], an adapter not named: scale 0); a completion's
 * "lora" field (the same list, read by serve_fields.c's serve_lora_list)
 * replaces them for that request alone.
 */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "serve.h"

struct MHD_Response *serve_lora_get(server *s, unsigned *status) {
    cJSON *o = cJSON_CreateArray();
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->n_lora; i++) {
        cJSON *a = cJSON_CreateObject();
        cJSON_AddNumberToObject(a, "id", i);
        cJSON_AddStringToObject(a, "path", s->lora_path[i]);
        cJSON_AddNumberToObject(a, "scale", s->lora_scale[i]);
        cJSON_AddItemToArray(o, a);
    }
    pthread_mutex_unlock(&s->mu);
    *status = 200;
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    struct MHD_Response *r = text ? serve_json_response(text) : NULL;
    cJSON_free(text);
    return r;
}

struct MHD_Response *serve_lora_post(server *s, const request *r, unsigned *status) {
    pthread_mutex_lock(&s->mu);
    memcpy(s->lora_scale, r->lora, sizeof(float) * (size_t)s->n_lora);
    pthread_mutex_unlock(&s->mu);
    *status = 200;
    return serve_json_response("{\"success\":true}");
}

octo_status serve_use_lora(server *s, int slot, const request *r) {
    if (!s->n_lora) return OCTO_OK;
    float scales[OCTO_MAX_ADAPTERS];
    pthread_mutex_lock(&s->mu);
    memcpy(scales, r->has_lora ? r->lora : s->lora_scale, sizeof scales);
    pthread_mutex_unlock(&s->mu);
    return s->sessions[slot] ? octo_session_set_adapters(s->sessions[slot], s->lora, scales, s->n_lora)
                             : octo_set_adapters(s->m, s->lora, scales, s->n_lora);
}
