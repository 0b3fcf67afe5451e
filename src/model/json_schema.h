/*
 * json_schema — a JSON schema as a GBNF grammar (model/grammar.h) whose
 * sentences are JSON documents the schema validates.
 *
 * What is covered (docs/structured-output.md has the table):
 *   type (a name or a list), enum, const, anyOf / oneOf (as alternatives:
 *   keep oneOf's branches disjoint), allOf of objects (merged), $ref to
 *   "#", "#/$defs/..." or "#/definitions/..." (recursion works);
 *   objects: properties in their order, required, additionalProperties
 *   (absent or false: no other member; true or a schema: any others after);
 *   arrays: items, prefixItems, minItems, maxItems;
 *   strings: minLength, maxLength, pattern (a regular expression subset:
 *   literals, ., classes, \d \w \s, groups, |, * + ? {m,n}; matched whole),
 *   format date, time, date-time, uuid (any other format is an annotation,
 *   as JSON Schema says by default: the string is unconstrained);
 *   integers: minimum, maximum, exclusiveMinimum, exclusiveMaximum;
 *   numbers: minimum and maximum when they are integers >= 0.
 * Every other keyword that constrains (not, if, uniqueItems, multipleOf,
 * minProperties, ...) is refused with ERR_UNSUPPORTED naming it, never
 * ignored; annotations (title, description, default, examples, $schema,
 * $id, $comment, deprecated, readOnly, writeOnly) are ignored.
 *
 * Whitespace between tokens is bounded (a newline and 20 indents at most),
 * and numbers have at most 16 integer digits: so a document always ends.
 *
 * The work is bounded, not only the output: each schema node is converted
 * once however many $refs or allOfs reach it, and a conversion takes at most
 * JSON_SCHEMA_MAX_STEPS node conversions, else ERR_UNSUPPORTED names where
 * it stopped (docs/structured-output.md, docs/limits.md).
 */
#ifndef OCTO_MODEL_JSON_SCHEMA_H
#define OCTO_MODEL_JSON_SCHEMA_H

#include <stddef.h>

#include "core/err.h"

#define JSON_SCHEMA_MAX_STEPS 50000 /* node conversions in one schema (each node once) */

/* *gbnf: malloc'd grammar text (root rule "root"); the caller frees it. */
err_code json_schema_to_gbnf(const char *schema, size_t len, char **gbnf, err_t *err);

/* The grammar of any JSON value (response_format json_object). */
const char *json_any_gbnf(void);

#endif
