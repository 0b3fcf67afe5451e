/*
 * serve_tools — a chat request's tools, in octo's default tool format
 * (docs/server.md), which any chat template carries as plain text:
 *
 *   the tools     a system message (after the request's own system text, if
 *                 any) listing each function's JSON (name, description,
 *                 parameters) between <tools> and </tools>, and how to call
 *   a call        <tool_call>{"name": NAME, "arguments": {...}}</tool_call>
 *   a result      a user message <tool_response>...</tool_response>
 *
 * The reply is constrained by a grammar made from the tools: a call's name is
 * one of the tools' (the one tool_choice names, if it names one) and its
 * arguments follow that tool's parameters schema. tool_choice "required" or
 * a function: the reply is one call; "auto" (the default): one call, or free
 * text that does not begin with '<'; "none": the tools are left out. One
 * call per reply (parallel_tool_calls is accepted; calls are not parallel).
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/json_schema.h" /* internal: a tool's parameters made a grammar */
#include "serve.h"

static const char *intro =
    "You can call functions. Each is given as JSON with its name, description and parameters (a JSON schema):\n<tools>\n";
static const char *how =
    "</tools>\nTo call one, answer with <tool_call>{\"name\": NAME, \"arguments\": ARGUMENTS}</tool_call> and nothing "
    "else. Otherwise answer in text.";

/* The tool_choice mode, and the one function it names (NULL: any). */
static const char *tool_choice(const cJSON *body, serve_tools *mode, const char **only) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(body, "tool_choice");
    *mode = TOOLS_AUTO, *only = NULL;
    if (!c || cJSON_IsNull(c)) return NULL;
    if (cJSON_IsString(c)) {
        if (!strcmp(c->valuestring, "none")) *mode = TOOLS_OFF;
        else if (!strcmp(c->valuestring, "required")) *mode = TOOLS_REQUIRED;
        else if (strcmp(c->valuestring, "auto")) return "'tool_choice' is none, auto, required or a function";
        return NULL;
    }
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "function"), "name");
    if (!cJSON_IsString(name)) return "'tool_choice' is none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}";
    *mode = TOOLS_REQUIRED, *only = name->valuestring;
    return NULL;
}

/* Every "$ref" in v, made to point where the tool's schema now lives: "#" at
 * #/$defs/tI, "#/$defs/X" and "#/definitions/X" at #/$defs/tI-X. */
static void rebase_refs(cJSON *v, int tool) {
    cJSON *e;
    cJSON_ArrayForEach(e, v) {
        if (e->string && !strcmp(e->string, "$ref") && cJSON_IsString(e)) {
            const char *ref = e->valuestring, *name = NULL;
            if (!strncmp(ref, "#/$defs/", 8)) name = ref + 8;
            else if (!strncmp(ref, "#/definitions/", 14)) name = ref + 14;
            char to[300];
            if (!strcmp(ref, "#")) snprintf(to, sizeof to, "#/$defs/t%d", tool);
            else if (name) snprintf(to, sizeof to, "#/$defs/t%d-%.200s", tool, name);
            else continue; /* not local: the converter refuses it */
            cJSON_SetValuestring(e, to);
        } else if (cJSON_IsObject(e) || cJSON_IsArray(e)) {
            rebase_refs(e, tool);
        }
    }
}

/* Tool i's parameters as #/$defs/tI of the calls' schema (and its own
 * definitions as tI-X), so its $refs resolve there; {"$ref": ...} to it. */
static cJSON *tool_arguments(const cJSON *params, cJSON *defs, int tool) {
    char name[32];
    snprintf(name, sizeof name, "t%d", tool);
    cJSON *copy = params ? cJSON_Duplicate(params, true) : cJSON_CreateObject();
    if (!params) cJSON_AddStringToObject(copy, "type", "object");
    rebase_refs(copy, tool);
    const char *const own[] = {"$defs", "definitions"};
    for (int k = 0; k < 2; k++) {
        cJSON *d = cJSON_DetachItemFromObjectCaseSensitive(copy, own[k]), *x;
        cJSON_ArrayForEach(x, d) {
            char key[300];
            snprintf(key, sizeof key, "t%d-%.200s", tool, x->string);
            cJSON_AddItemToObject(defs, key, cJSON_Duplicate(x, true));
        }
        cJSON_Delete(d);
    }
    cJSON_AddItemToObject(defs, name, copy);
    cJSON *ref = cJSON_CreateObject();
    char to[48];
    snprintf(to, sizeof to, "#/$defs/%s", name);
    cJSON_AddStringToObject(ref, "$ref", to);
    return ref;
}

/* {"anyOf": [one object per tool: {"name": {"const": NAME}, "arguments": PARAMETERS}], "$defs": ...} */
static cJSON *calls_schema(const cJSON *tools, const char *only, const char **why) {
    cJSON *any = cJSON_CreateArray(), *root = cJSON_CreateObject(), *defs = cJSON_CreateObject();
    cJSON_AddItemToObject(root, "anyOf", any);
    cJSON_AddItemToObject(root, "$defs", defs);
    const cJSON *t;
    int i = 0;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name"), *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        if (!cJSON_IsString(name)) return cJSON_Delete(root), *why = "each tool needs function.name", NULL;
        if (only && strcmp(only, name->valuestring)) continue;
        cJSON *call = cJSON_CreateObject(), *props = cJSON_CreateObject(), *req = cJSON_CreateArray();
        cJSON_AddStringToObject(call, "type", "object");
        cJSON_AddItemToObject(call, "properties", props);
        cJSON_AddStringToObject(cJSON_AddObjectToObject(props, "name"), "const", name->valuestring);
        cJSON_AddItemToObject(props, "arguments", tool_arguments(params, defs, i++));
        cJSON_AddItemToArray(req, cJSON_CreateString("name"));
        cJSON_AddItemToArray(req, cJSON_CreateString("arguments"));
        cJSON_AddItemToObject(call, "required", req);
        cJSON_AddItemToArray(any, call);
    }
    if (cJSON_GetArraySize(any) == 0) return cJSON_Delete(root), *why = "'tool_choice' names no tool of 'tools'", NULL;
    return root;
}

/* The reply's grammar: the calls' schema (JSON text) as GBNF, its root wrapped in the call's tags. */
static char *calls_grammar(const char *text, request *r, const char **why) {
    const serve_tools mode = r->tools;
    char *gbnf = NULL;
    err_t err = {0};
    if (json_schema_to_gbnf(text, strlen(text), &gbnf, &err)) {
        snprintf(r->why, sizeof r->why, "a tool's parameters: %s", err.msg);
        return *why = r->why, NULL;
    }
    const char *body = strchr(gbnf, '\n'); /* after the converter's first line, "root ::= X" */
    const char *x = gbnf + strlen("root ::= ");
    const size_t xn = (size_t)(body - x), n = strlen(gbnf) + 200;
    char *out = malloc(n);
    if (out)
        snprintf(out, n, "root ::= \"<tool_call>\" %.*s \"</tool_call>\"%s%s", (int)xn, x,
                 mode == TOOLS_AUTO ? " | free-text\nfree-text ::= [^<] .*" : "", body);
    free(gbnf);
    if (!out) *why = "out of memory";
    return out;
}

/* The tools' system message: after the request's own system text, or first. */
static const char *tools_message(const cJSON *tools, request *r) {
    size_t n = strlen(intro) + strlen(how) + 4 + (!strcmp(r->msgs[0].role, "system") ? strlen(r->msgs[0].content) + 2 : 0);
    const cJSON *t;
    char *json[SERVE_MAX_TOOLS] = {0};
    int k = 0;
    cJSON_ArrayForEach(t, tools) {
        json[k] = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(t, "function"));
        n += json[k] ? strlen(json[k]) + 1 : 0;
        k++;
    }
    char *out = request_own(r, malloc(n));
    const bool has_system = !strcmp(r->msgs[0].role, "system");
    if (out) {
        snprintf(out, n, "%s%s%s", has_system ? r->msgs[0].content : "", has_system ? "\n\n" : "", intro);
        for (int i = 0; i < k; i++)
            if (json[i]) strcat(out, json[i]), strcat(out, "\n");
        strcat(out, how);
    }
    for (int i = 0; i < k; i++) free(json[i]);
    if (!out) return "out of memory";
    if (!has_system) memmove(r->msgs + 1, r->msgs, sizeof *r->msgs * (size_t)r->n_msgs++);
    r->msgs[0] = (octo_message){"system", out};
    return NULL;
}

const char *serve_parse_tools(const cJSON *body, request *r) {
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(body, "tools");
    const char *only = NULL, *why = tool_choice(body, &r->tools, &only);
    if (!tools || cJSON_IsNull(tools)) {
        r->tools = TOOLS_OFF;
        return why ? why : cJSON_GetObjectItemCaseSensitive(body, "tool_choice") && only ? "'tool_choice' without 'tools'" : NULL;
    }
    if (why) return why;
    if (!cJSON_IsArray(tools) || cJSON_GetArraySize(tools) < 1 || cJSON_GetArraySize(tools) > SERVE_MAX_TOOLS)
        return "'tools' is an array of 1..32 tools";
    if (r->tools == TOOLS_OFF) return NULL;
    if (r->gp.grammar || r->gp.json_schema) return "'tools' together with 'response_format' is not supported";
    cJSON *schema = calls_schema(tools, only, &why);
    char *text = schema ? cJSON_PrintUnformatted(schema) : NULL;
    cJSON_Delete(schema);
    if (!schema) return why;
    if (!(r->tools_schema = request_own(r, text))) return "out of memory";
    return tools_message(tools, r);
}

const char *serve_tools_grammar(request *r) {
    if (!r->tools_schema || r->gp.grammar) return NULL;
    const char *why = NULL;
    char *g = calls_grammar(r->tools_schema, r, &why);
    if (!g) return why;
    return (r->gp.grammar = request_own(r, g)) ? NULL : "out of memory";
}

bool serve_tool_call(const char *text, size_t n, char **name, char **arguments) {
    static const char open[] = "<tool_call>", close[] = "</tool_call>";
    *name = *arguments = NULL;
    if (n < sizeof open + sizeof close - 2 || strncmp(text, open, sizeof open - 1)) return false;
    const char *end = text + n - (sizeof close - 1);
    if (strncmp(end, close, sizeof close - 1)) return false;
    cJSON *call = cJSON_ParseWithLength(text + sizeof open - 1, (size_t)(end - text) - (sizeof open - 1));
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(call, "name"), *args = cJSON_GetObjectItemCaseSensitive(call, "arguments");
    if (cJSON_IsString(nm) && args) *name = strdup(nm->valuestring), *arguments = cJSON_PrintUnformatted(args);
    cJSON_Delete(call);
    if (*name && *arguments) return true;
    free(*name), free(*arguments);
    *name = *arguments = NULL;
    return false;
}
