// The official `openai` npm client against `octo serve` (tests/serve.sh):
//   node openai.mjs URL KEY EXPECTED_TEXT_FILE
// Streams a completion and a chat completion; the completion's text must equal EXPECTED.
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
console.log("openai.mjs: all passed");
