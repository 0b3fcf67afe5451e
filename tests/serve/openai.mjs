// The official `openai` npm client against `octo serve` (tests/serve.sh):
//   node openai.mjs URL KEY EXPECTED_TEXT_FILE
// Streams a completion and a chat completion; the completion's text must equal EXPECTED.
// Structured output: response_format json_schema (20 sampled replies, each valid), tools
// (a call whose arguments follow the tool's schema, then the result sent back), content-part
// arrays, logprobs, n, embeddings.create (the client's default base64 and float agree), the
// fields OpenAI's and llama-server's clients also send, and a field octo does not support refused
// with a 400 that names it.
import OpenAI from "openai";
import { readFileSync } from "node:fs";

const [url, key, expectedFile] = process.argv.slice(2);
const expected = readFileSync(expectedFile, "utf8").replace(/\n$/, "");
const client = new OpenAI({ baseURL: url + "/v1", apiKey: key });

const stream = await client.completions.create({
  model: "any", prompt: "Once upon a time", max_tokens: 24, temperature: 0, stream: true,
});
let text = "";
for await (const chunk of stream) text += chunk.choices[0]?.text ?? "";
if (text !== expected) throw new Error(`text ${JSON.stringify(text)} != ${JSON.stringify(expected)}`);

const chat = await client.chat.completions.create({
  model: "any", messages: [{ role: "user", content: "Hi" }], max_tokens: 8, temperature: 0, stream: true,
});
let reply = "";
for await (const chunk of chat) reply += chunk.choices[0]?.delta?.content ?? "";
if (!reply) throw new Error("empty chat reply");
const models = await client.models.list();
if (!models.data.length) throw new Error("no models");

// response_format json_schema: every sampled reply parses and holds the schema's shape
const schema = {
  type: "object",
  properties: { name: { type: "string", maxLength: 16 }, age: { type: "integer", minimum: 1, maximum: 99 },
                pet: { enum: ["cat", "dog"] } },
  required: ["name", "age", "pet"], additionalProperties: false,
};
for (let seed = 0; seed < 20; seed++) {
  const r = await client.chat.completions.create({
    model: "any", messages: [{ role: "user", content: [{ type: "text", text: "Tell me about a kid." }] }],
    max_tokens: 200, temperature: 1.0, seed,
    response_format: { type: "json_schema", json_schema: { name: "kid", strict: true, schema } },
  });
  const doc = JSON.parse(r.choices[0].message.content);
  const keys = Object.keys(doc).sort().join(",");
  if (keys !== "age,name,pet" || typeof doc.name !== "string" || [...doc.name].length > 16 /* maxLength counts code points, not UTF-16 units */ || !Number.isInteger(doc.age) ||
      doc.age < 1 || doc.age > 99 || !["cat", "dog"].includes(doc.pet))
    throw new Error(`seed ${seed}: ${r.choices[0].message.content} does not hold the schema`);
}

// tools: the call's arguments follow the tool's parameters; the result goes back as a tool message
const tools = [{ type: "function", function: { name: "get_weather", description: "The weather in a city",
  parameters: { type: "object", properties: { city: { type: "string", maxLength: 12 },
                                              days: { type: "integer", minimum: 1, maximum: 7 } },
                required: ["city", "days"] } } }];
const messages = [{ role: "user", content: "What is the weather in Paris?" }];
const called = await client.chat.completions.create({ model: "any", messages, tools, tool_choice: "required",
                                                      max_tokens: 120, temperature: 0 });
const choice = called.choices[0];
if (choice.finish_reason !== "tool_calls" || choice.message.tool_calls.length !== 1)
  throw new Error(`no tool call: ${JSON.stringify(choice)}`);
const call = choice.message.tool_calls[0];
const args = JSON.parse(call.function.arguments);
if (call.type !== "function" || call.function.name !== "get_weather" || typeof args.city !== "string" ||
    !Number.isInteger(args.days) || args.days < 1 || args.days > 7)
  throw new Error(`bad call ${JSON.stringify(call)}`);
messages.push(choice.message, { role: "tool", tool_call_id: call.id, content: "Sunny, 21 C" });
const after = await client.chat.completions.create({ model: "any", messages, tools, tool_choice: "none",
                                                     max_tokens: 16, temperature: 0 });
if (typeof after.choices[0].message.content !== "string") throw new Error("no reply after the tool's result");

// logprobs and n
const lp = await client.chat.completions.create({ model: "any", messages: [{ role: "user", content: "Hi" }],
  max_tokens: 4, temperature: 0.8, seed: 3, n: 2, logprobs: true, top_logprobs: 3 });
if (lp.choices.length !== 2 || lp.choices[1].index !== 1) throw new Error("n: 2 did not give two choices");
const entries = lp.choices[0].logprobs.content;
if (entries.length !== lp.usage.completion_tokens / 2 && entries.length < 1) throw new Error("no logprobs");
for (const e of entries)
  if (!(e.logprob <= 0) || e.top_logprobs.length !== 3 || e.top_logprobs[0].logprob < e.logprob)
    throw new Error(`bad logprob entry ${JSON.stringify(e)}`);

// embeddings: the client's default (base64) and float agree, unit length
const emb = await client.embeddings.create({ model: "any", input: ["a cat", "a dog"] });
const flt = await client.embeddings.create({ model: "any", input: "a cat", encoding_format: "float" });
const a = emb.data[0].embedding, f = flt.data[0].embedding;
if (emb.data.length !== 2 || a.length !== f.length || a.length < 8) throw new Error("embedding shapes");
let norm = 0, diff = 0;
for (let i = 0; i < a.length; i++) norm += a[i] * a[i], diff = Math.max(diff, Math.abs(a[i] - f[i]));
if (Math.abs(norm - 1) > 1e-4 || diff > 1e-6) throw new Error(`embeddings: norm ${norm}, base64 vs float ${diff}`);

// what the client may also send (docs/server.md's table): a developer message and the fields that
// change nothing here are accepted; the completions API's logprobs; llama-server's top_k, passed as is
const dev = await client.chat.completions.create({ model: "any", max_tokens: 6, temperature: 0,
  messages: [{ role: "developer", content: "Be brief." }, { role: "user", content: "Hi" }],
  store: false, metadata: { app: "test" }, service_tier: "auto", reasoning_effort: "low", logit_bias: {}, user: "u" });
if (dev.choices[0].message.role !== "assistant") throw new Error(`developer message: ${JSON.stringify(dev)}`);
const legacy = await client.completions.create({ model: "any", prompt: "Once upon a time", max_tokens: 24,
                                                 temperature: 0, logprobs: 2 });
const ll = legacy.choices[0].logprobs;
if (legacy.choices[0].text !== expected || ll.tokens.join("") !== expected || ll.token_logprobs.length !== 24 ||
    ll.top_logprobs.some((t) => Object.keys(t).length < 1 || Object.keys(t).length > 2))
  throw new Error(`completions logprobs: ${JSON.stringify(ll)}`);
const k1 = await client.completions.create({ model: "any", prompt: "Once upon a time", max_tokens: 24,
                                             temperature: 1, seed: 5, top_k: 1 });
if (k1.choices[0].text !== expected) throw new Error(`top_k 1 is not greedy: ${k1.choices[0].text}`);

// a field octo does not support: a 400 that names it
try {
  await client.chat.completions.create({ model: "any", messages: [{ role: "user", content: "Hi" }], logit_bias: { 1: 5 } });
  throw new Error("logit_bias was accepted");
} catch (e) {
  if (e.status !== 400 || !String(e.message).includes("logit_bias")) throw e;
}
console.log("openai.mjs: all passed");
