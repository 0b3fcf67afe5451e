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

/* {"anyOf": [one object per tool: {"name": {"const": NAME}, "arguments": PARAMETERS}]} */
static cJSON *calls_schema(const cJSON *tools, const char *only, const char **why) {
    cJSON *any = cJSON_CreateArray(), *root = cJSON_CreateObject();
    cJSON_AddItemToObject(root, "anyOf", any);
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name"), *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        if (!cJSON_IsString(name)) return cJSON_Delete(root), *why = "each tool needs function.name", NULL;
        if (only && strcmp(only, name->valuestring)) continue;
        cJSON *call = cJSON_CreateObject(), *props = cJSON_CreateObject(), *req = cJSON_CreateArray();
        cJSON_AddStringToObject(call, "type", "object");
        cJSON_AddItemToObject(call, "properties", props);
        cJSON_AddStringToObject(cJSON_AddObjectToObject(props, "name"), "const", name->valuestring);
        if (params) cJSON_AddItemToObject(props, "arguments", cJSON_Duplicate(params, true));
        else cJSON_AddStringToObject(cJSON_AddObjectToObject(props, "arguments"), "type", "object");
        cJSON_AddItemToArray(req, cJSON_CreateString("name"));
        cJSON_AddItemToArray(req, cJSON_CreateString("arguments"));
        cJSON_AddItemToObject(call, "required", req);
        cJSON_AddItemToArray(any, call);
    }
    if (cJSON_GetArraySize(any) == 0) return cJSON_Delete(root), *why = "'tool_choice' names no tool of 'tools'", NULL;
    return root;
}

/* The reply's grammar: the calls' schema as GBNF, its root wrapped in the call's tags. */
static char *calls_grammar(const cJSON *schema, request *r, const char **why) {
    const serve_tools mode = r->tools;
    char *text = cJSON_PrintUnformatted(schema), *gbnf = NULL;
    err_t err = {0};
    if (!text || json_schema_to_gbnf(text, strlen(text), &gbnf, &err)) {
        snprintf(r->why, sizeof r->why, "a tool's parameters: %s", text ? err.msg : "out of memory");
        free(text);
        return *why = r->why, NULL;
    }
    free(text);
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
    char *g = schema ? calls_grammar(schema, r, &why) : NULL;
    cJSON_Delete(schema);
    if (!g) return why;
    if (!(r->gp.grammar = request_own(r, g))) return "out of memory";
    return tools_message(tools, r);
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
