"""Structured output (docs/structured-output.md): 20 JSON schemas, 50 generations each from the trained
stories260K model at temperature 1.0 (no top-k, top-p or min-p: every token the grammar allows can be
drawn), and every output must parse and validate against its schema, checked by an independent
validator (python3-jsonschema, Draft 2020-12, with its format checker). Greedy text under a grammar is
the same with every speculative proposer (the trained draft's case: tests/test_spec.c)."""
import json
import os

import pytest

import octo

jsonschema = pytest.importorskip("jsonschema")  # Debian's python3-jsonschema (scripts/setup.sh)

PROMPT = "Once upon a time"
# OCTO_TEST_QUICK (.ci/run's sanitizer builds, 10-30x slower): 10 per schema; the README's command runs all 50
N_SAMPLES = 10 if os.environ.get("OCTO_TEST_QUICK", "0") not in ("", "0") else 50

NAME = {"type": "string", "maxLength": 24}
SCHEMAS = [
    {"type": "object", "properties": {"name": NAME, "age": {"type": "integer", "minimum": 0, "maximum": 120}},
     "required": ["name", "age"]},
    {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "null"}, "c": {"type": "number"}}},
    {"type": "array", "items": {"enum": ["red", "green", "blue", 7, None]}, "minItems": 1, "maxItems": 4},
    {"type": "integer", "minimum": -50, "maximum": 50},
    {"type": "number", "minimum": 0, "maximum": 100},
    {"type": "string", "pattern": "^[A-Z]{3}-\\d{2,4}$"},
    {"type": "string", "minLength": 3, "maxLength": 8},
    {"type": "string", "format": "date"},
    {"type": "string", "format": "date-time"},
    {"type": "string", "format": "uuid"},
    {"type": "object", "properties": {
        "address": {"type": "object", "properties": {"street": {"type": "string", "maxLength": 30},
                                                     "zip": {"type": "string", "pattern": "^\\d{5}$"}},
                    "required": ["street", "zip"]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 3}},
     "required": ["address"]},
    {"$defs": {"pt": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                      "required": ["x", "y"]}},
     "type": "object", "properties": {"from": {"$ref": "#/$defs/pt"}, "to": {"$ref": "#/$defs/pt"}},
     "required": ["from", "to"]},
    {"$defs": {"node": {"type": "object", "properties": {
        "v": {"type": "integer", "minimum": 0, "maximum": 9},
        "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["v", "next"]}},
     "$ref": "#/$defs/node"},
    {"type": ["string", "integer", "null"], "maxLength": 12},
    {"type": "object", "properties": {"kind": {"const": "story"}, "id": {"type": "integer", "minimum": 1}},
     "required": ["kind", "id"]},
    {"anyOf": [
        {"type": "object", "properties": {"pet": {"const": "cat"}, "lives": {"type": "integer", "minimum": 1,
                                                                              "maximum": 9}},
         "required": ["pet", "lives"]},
        {"type": "object", "properties": {"pet": {"const": "dog"}, "good": {"type": "boolean"}},
         "required": ["pet", "good"]}]},
    {"allOf": [{"type": "object", "properties": {"title": NAME}, "required": ["title"]},
               {"type": "object", "properties": {"pages": {"type": "integer", "minimum": 1, "maximum": 500}}}]},
    {"type": "object", "propertyNames": {"pattern": "^[a-z]{1,8}$"}, "maxProperties": 6,
     "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 999}},
    {"type": "array", "prefixItems": [{"enum": ["start", "stop"]}, {"type": "integer"}, {"type": "boolean"}],
     "items": False},
    {"type": "array", "items": {"type": "object", "properties": {
        "id": {"type": "integer", "minimum": 1, "maximum": 1000}, "done": {"type": "boolean"},
        "note": {"type": "string", "maxLength": 16}}, "required": ["id", "done"]},
     "minItems": 2, "maxItems": 5},
]


@pytest.fixture(scope="module")
def model_file():
    """stories260K: the data folder's, else the one the package carries (the same file)."""
    data = os.environ.get("OCTO_TEST_DATA", "")
    path = os.path.join(data, "models", "stories260K.gguf")
    if data and os.path.exists(path):
        return path
    if not octo.EMBEDDED_MODEL:
        pytest.skip("no trained model: no data folder, and the package carries none")
    return octo.EMBEDDED_MODEL


@pytest.fixture(scope="module")
def model(model_file):
    m = octo.Model(model_file)
    yield m
    m.close()


def validator(schema):
    cls = jsonschema.Draft202012Validator
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def test_twenty_schemas_fifty_samples_each(model):
    assert len(SCHEMAS) == 20
    for i, schema in enumerate(SCHEMAS):
        check = validator(schema)
        for seed in range(N_SAMPLES):
            s = model.generate(PROMPT, max_tokens=400, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=seed,
                               json_schema=schema, spec="none")
            text = s.text()
            assert s.stop_reason == "end_of_turn", (i, seed, text)  # the grammar ended it, not max_tokens
            doc = json.loads(text)
            errors = [e.message for e in check.iter_errors(doc)]
            assert not errors, (i, seed, text, errors)


def test_greedy_is_the_same_with_every_proposer(model):
    # (the trained draft model's case is in tests/test_spec.c: the API refuses it as a draft of a model
    # no larger than it)
    for schema in (SCHEMAS[0], SCHEMAS[10], SCHEMAS[19]):
        texts = {spec: model.generate(PROMPT, max_tokens=400, temperature=0, json_schema=schema, spec=spec).text()
                 for spec in ("none", "ngram", "lookahead")}
        assert len(set(texts.values())) == 1, texts
        validator(schema).validate(json.loads(texts["none"]))
    # and the grammar did something: without it the text is a story
    assert not model.generate(PROMPT, max_tokens=40, temperature=0, spec="none").text().startswith("{")


def test_a_grammar(model):
    g = 'root ::= "The " animal " is " color "."\nanimal ::= "cat" | "dog" | "bird"\ncolor ::= [a-z]{3,6}\n'
    for seed in range(10):
        text = model.generate(PROMPT, max_tokens=64, temperature=1.0, seed=seed, grammar=g).text()
        assert text.startswith("The ") and text.endswith(".") and text.split()[1] in ("cat", "dog", "bird"), text


def test_bad_constraints_are_errors(model):
    with pytest.raises(octo.OctoError, match="keyword 'not' is not supported"):
        model.generate(PROMPT, json_schema={"type": "string", "not": {"const": "x"}})
    with pytest.raises(octo.OctoError, match="rule 'x' is used but never defined"):
        model.generate(PROMPT, grammar="root ::= x")
    with pytest.raises(octo.OctoError, match="not both"):
        model.generate(PROMPT, grammar='root ::= "a"', json_schema={"type": "string"})


def test_embed(model):
    a, b = model.embed("The cat sat on the mat."), model.embed("The cat sat on the mat.")
    c = model.embed("Tom ate pizza with his dad.")
    assert len(a) == model.info().n_embd and a == b
    assert abs(sum(x * x for x in a) - 1.0) < 1e-5
    assert sum(x * y for x, y in zip(a, c)) < 0.99
    with pytest.raises(octo.OctoError, match="empty"):
        model.embed("")
