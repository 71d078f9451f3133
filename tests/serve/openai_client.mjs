// Drives `sluice serve` with the official OpenAI Node client (run by
// tests/unit/serve_test.cpp when node and the package are installed:
// cd tests/serve && npm install openai). Usage: node openai_client.mjs BASE_URL
import OpenAI from "openai";

const baseURL = process.argv[2];
const client = new OpenAI({ baseURL, apiKey: "unused" });
const fail = (msg) => { console.error(`FAIL: ${msg}`); process.exit(1); };

const models = await client.models.list();
if (models.data.length !== 1) fail(`models: ${JSON.stringify(models.data)}`);
const model = models.data[0].id;

const args = { model, prompt: "Once upon a time", max_tokens: 12, temperature: 0 };
const done = await client.completions.create(args);
const text = done.choices[0].text;
if (!text || done.usage.completion_tokens !== 12) fail(`completion: ${JSON.stringify(done)}`);

let streamed = "";
let finish = null;
for await (const chunk of await client.completions.create({ ...args, stream: true })) {
  streamed += chunk.choices[0].text;
  if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
}
if (streamed !== text) fail(`stream ${JSON.stringify(streamed)} != ${JSON.stringify(text)}`);
if (finish !== "length") fail(`finish_reason ${finish}`);

try {
  await client.completions.create({ ...args, temperature: "hot" });
  fail("a bad temperature was accepted");
} catch (e) {
  if (e.status !== 400) fail(`bad request: status ${e.status}`);
}
console.log("OPENAI_CLIENT_OK");
