// Drives `sluice serve` with the official OpenAI Node client (run by
// tests/unit/serve_test.cpp and serve_tool_call_test.cpp when node and the
// package are installed: cd tests/serve && npm install openai).
// Usage: node openai_client.mjs BASE_URL         completions, streamed and not
//        node openai_client.mjs BASE_URL tools   a tool call (serve_tool_call_test's model)
import OpenAI from "openai";

const baseURL = process.argv[2];
const client = new OpenAI({ baseURL, apiKey: "unused" });
const fail = (msg) => { console.error(`FAIL: ${msg}`); process.exit(1); };

const models = await client.models.list();
if (models.data.length !== 1) fail(`models: ${JSON.stringify(models.data)}`);
const model = models.data[0].id;

if (process.argv[3] === "tools") {
  // The model answers every question with get_weather({"city": "Paris"}).
  const tools = [{
    type: "function",
    function: {
      name: "get_weather",
      description: "Current weather of a city",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  }];
  const question = { role: "user", content: "What is the weather in Paris?" };
  const request = { model, messages: [question], tools, temperature: 0, max_tokens: 16 };
  const checkCalls = (calls, what) => {
    if (!calls || calls.length !== 1) fail(`${what}: tool_calls ${JSON.stringify(calls)}`);
    const [call] = calls;
    if (call.type !== "function" || call.function.name !== "get_weather" || !call.id)
      fail(`${what}: call ${JSON.stringify(call)}`);
    const args = JSON.parse(call.function.arguments);
    if (JSON.stringify(args) !== JSON.stringify({ city: "Paris" })) fail(`${what}: arguments ${call.function.arguments}`);
  };

  const done = await client.chat.completions.create(request);
  const message = done.choices[0].message;
  checkCalls(message.tool_calls, "non-streaming");
  if (done.choices[0].finish_reason !== "tool_calls") fail(`finish_reason ${done.choices[0].finish_reason}`);

  // Streamed: the raw chunks, then the client's own assembly of them.
  let finish = null;
  const streamed = [];
  for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
    const choice = chunk.choices[0];
    for (const d of choice.delta.tool_calls ?? []) {
      if (d.index !== streamed.length) fail(`streamed call index ${d.index}`);
      streamed.push(d);
    }
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  checkCalls(streamed, "streaming");
  if (finish !== "tool_calls") fail(`streamed finish_reason ${finish}`);
  const assembled = await client.chat.completions.stream(request).finalChatCompletion();
  checkCalls(assembled.choices[0].message.tool_calls, "assembled stream");

  // The follow-up: the call (content null, as OpenAI's own answers have it) and its result.
  const followUp = await client.chat.completions.create({
    ...request,
    messages: [question, { ...message, content: null }, { role: "tool", tool_call_id: message.tool_calls[0].id, content: '{"temperature_c": 21}' }],
  });
  if (followUp.choices[0].message.role !== "assistant") fail(`follow-up: ${JSON.stringify(followUp)}`);
  if (!(followUp.usage.prompt_tokens > done.usage.prompt_tokens)) fail(`follow-up usage ${JSON.stringify(followUp.usage)}`);
  console.log("OPENAI_TOOL_CALLS_OK");
  process.exit(0);
}

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
