// Drives every endpoint of `sluice serve` beyond plain completions with the
// official clients, latest versions: `openai` (chat logprobs, json_schema,
// forced tool calls, /v1/responses streamed and chained) and
// `@anthropic-ai/sdk` (/v1/messages streamed and not, tool_use). Run by
// tests/unit/serve_apis_test.cpp against a server whose chat renderer joins
// the messages' contents (so any text is a prompt for the stories model).
// Usage: node apis_clients.mjs BASE_URL KEY   (BASE_URL without /v1)
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";

const [base, apiKey] = process.argv.slice(2);
const fail = (msg) => { console.error(`FAIL: ${msg}`); process.exit(1); };
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey });
const anthropic = new Anthropic({ baseURL: base, apiKey });
const model = "stories";
const messages = [{ role: "user", content: "Once upon a time" }];
const schema = { type: "object", properties: { ok: { type: "boolean" }, n: { type: "integer" } },
                 required: ["ok", "n"], additionalProperties: false };
const valid = (v) => typeof v === "object" && typeof v.ok === "boolean" && Number.isInteger(v.n) && Object.keys(v).length === 2;

// Chat logprobs, whole and streamed.
const lp = await openai.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 2 });
const entries = lp.choices[0].logprobs.content;
if (entries.length !== lp.usage.completion_tokens || entries[0].top_logprobs.length !== 2) fail(`logprobs ${JSON.stringify(lp)}`);
let streamedEntries = 0;
for await (const c of await openai.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0, logprobs: true, stream: true }))
  streamedEntries += c.choices[0]?.logprobs?.content?.length ?? 0;
if (streamedEntries !== entries.length) fail(`streamed logprobs ${streamedEntries} != ${entries.length}`);

// json_schema, whole and streamed.
const rf = { type: "json_schema", json_schema: { name: "t", schema, strict: true } };
const js = await openai.chat.completions.create({ model, messages, max_tokens: 256, temperature: 0, response_format: rf });
if (!valid(JSON.parse(js.choices[0].message.content))) fail(`json_schema ${js.choices[0].message.content}`);
let jsText = "";
for await (const c of await openai.chat.completions.create({ model, messages, max_tokens: 256, temperature: 0, response_format: rf, stream: true }))
  jsText += c.choices[0]?.delta?.content ?? "";
if (jsText !== js.choices[0].message.content) fail(`streamed json_schema ${jsText}`);

// A forced tool call, whole and assembled by the client from the stream.
const tools = [{ type: "function", function: { name: "count", parameters: schema } }];
const forced = { model, messages, max_tokens: 256, temperature: 0, tools, tool_choice: { type: "function", function: { name: "count" } } };
const call = (await openai.chat.completions.create(forced)).choices[0].message.tool_calls[0];
if (call.function.name !== "count" || !valid(JSON.parse(call.function.arguments))) fail(`forced call ${JSON.stringify(call)}`);
const assembled = await openai.chat.completions.stream(forced).finalChatCompletion();
if (assembled.choices[0].message.tool_calls[0].function.arguments !== call.function.arguments) fail("assembled forced call");

// Responses: whole, streamed, chained.
const r1 = await openai.responses.create({ model, input: "a time", instructions: "Once upon ", max_output_tokens: 10 });
if (!r1.output_text) fail(`responses ${JSON.stringify(r1)}`);
let deltas = "", completed = null;
for await (const e of await openai.responses.create({ model, input: "a time", instructions: "Once upon ", max_output_tokens: 10, stream: true })) {
  if (e.type === "response.output_text.delta") deltas += e.delta;
  if (e.type === "response.completed" || e.type === "response.incomplete") completed = e.response;
}
if (deltas !== r1.output_text || !completed) fail(`streamed responses ${JSON.stringify(deltas)}`);
const r2 = await openai.responses.create({ model, input: " The end", previous_response_id: r1.id, max_output_tokens: 4 });
if (r2.previous_response_id !== r1.id) fail("previous_response_id");
const rc = await openai.responses.create({ model, input: "Lily", max_output_tokens: 256, tools: [{ type: "function", name: "count", parameters: schema, strict: true }], tool_choice: "required" });
const fc = rc.output.find((o) => o.type === "function_call");
if (!fc || !valid(JSON.parse(fc.arguments))) fail(`responses call ${JSON.stringify(rc.output)}`);

// Anthropic Messages: whole, streamed, tool_use.
const m1 = await anthropic.messages.create({ model, max_tokens: 10, system: "Once upon ", messages: [{ role: "user", content: "a time" }] });
if (m1.content[0].type !== "text" || m1.stop_reason !== "max_tokens") fail(`messages ${JSON.stringify(m1)}`);
const m2 = await anthropic.messages.stream({ model, max_tokens: 10, system: "Once upon ", messages: [{ role: "user", content: "a time" }] }).finalMessage();
if (m2.content[0].text !== m1.content[0].text) fail(`streamed messages ${JSON.stringify(m2)}`);
const mt = await anthropic.messages.create({ model, max_tokens: 256, messages: [{ role: "user", content: "Lily" }],
  tools: [{ name: "count", input_schema: schema }], tool_choice: { type: "tool", name: "count" } });
const use = mt.content.find((b) => b.type === "tool_use");
if (!use || use.name !== "count" || !valid(use.input) || mt.stop_reason !== "tool_use") fail(`tool_use ${JSON.stringify(mt)}`);
const mts = await anthropic.messages.stream({ model, max_tokens: 256, messages: [{ role: "user", content: "Lily" }],
  tools: [{ name: "count", input_schema: schema }], tool_choice: { type: "tool", name: "count" } }).finalMessage();
if (JSON.stringify(mts.content.find((b) => b.type === "tool_use").input) !== JSON.stringify(use.input)) fail("streamed tool_use");
console.log("APIS_CLIENTS_OK");
