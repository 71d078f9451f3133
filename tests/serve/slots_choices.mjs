// Drives `sluice serve`'s slot files and n > 1 with the official OpenAI Node
// client (run by tests/unit/serve_node_slots_test.cpp in two phases, one per
// server, both with --slot-save-path DIR and --parallel 2 on the stories model).
// Usage: node slots_choices.mjs BASE_URL save DIR     (BASE_URL without /v1)
//        node slots_choices.mjs BASE_URL restore DIR
// save: n = 2 and 3 choices (whole and streamed) equal the n = 1 greedy text;
//       the prompt's slot is saved, then the never-stopped continuation is
//       written to DIR/expected.json.
// restore (a new server): a corrupt file is a 400; the saved file restored
//       into slot 1 serves the prompt (cached tokens) and the continuation
//       equals the never-stopped server's.
import OpenAI from "openai";
import { readFileSync, writeFileSync } from "node:fs";

const [base, phase, dir] = process.argv.slice(2);
const fail = (msg) => { console.error(`FAIL: ${msg}`); process.exit(1); };
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused" });
const root = new OpenAI({ baseURL: base, apiKey: "unused" });  // the llama-server paths outside /v1
const model = "stories";
const prompt = "Once upon a time, there was a little girl named Lily. She loved to play";
const cont = { model, prompt, max_tokens: 12, temperature: 0 };
const slots = () => root.get("/slots");

if (phase === "save") {
  // n > 1: greedy choices are all the n = 1 text; usage counts every choice.
  const one = await openai.completions.create({ model, prompt: "Tom had a red ball", max_tokens: 10, temperature: 0 });
  const text = one.choices[0].text;
  const two = await openai.completions.create({ model, prompt: "Tom had a red ball", max_tokens: 10, temperature: 0, n: 2 });
  if (two.choices.length !== 2 || two.choices.some((c, i) => c.index !== i || c.text !== text))
    fail(`n=2 choices ${JSON.stringify(two.choices)} != ${JSON.stringify(text)}`);
  if (two.usage.completion_tokens !== 2 * one.usage.completion_tokens) fail(`n=2 usage ${JSON.stringify(two.usage)}`);
  const chat = await openai.chat.completions.create({ model, messages: [{ role: "user", content: "Tom had a red ball" }],
                                                      max_tokens: 10, temperature: 0, n: 2 });
  if (chat.choices.length !== 2 || chat.choices[0].message.content !== chat.choices[1].message.content)
    fail(`chat n=2 ${JSON.stringify(chat.choices)}`);
  const streamed = ["", ""];
  const finished = [null, null];
  for await (const c of await openai.completions.create({ model, prompt: "Tom had a red ball", max_tokens: 10,
                                                          temperature: 0, n: 2, stream: true })) {
    for (const ch of c.choices) {
      streamed[ch.index] += ch.text;
      if (ch.finish_reason) finished[ch.index] = ch.finish_reason;
    }
  }
  if (streamed.some((s) => s !== text) || finished.some((f) => f !== one.choices[0].finish_reason))
    fail(`streamed n=2 ${JSON.stringify(streamed)} ${JSON.stringify(finished)} != ${JSON.stringify(text)}`);
  // More choices than slots: a 400 naming --parallel.
  try {
    await openai.completions.create({ model, prompt, max_tokens: 2, n: 3 });
    fail("n=3 on 2 slots was accepted");
  } catch (e) {
    if (e.status !== 400 || !String(e.message).includes("--parallel")) fail(`n=3: ${e.status} ${e.message}`);
  }

  // The prompt's state, saved from the slot that served it.
  const before = await slots();
  await openai.completions.create({ ...cont, max_tokens: 1 });
  const served = (await slots()).filter((s) => s.n_past !== before[s.id].n_past);
  if (served.length !== 1 || served[0].is_processing) fail(`slots ${JSON.stringify(before)} -> ${JSON.stringify(served)}`);
  const slot = served[0];
  const saved = await root.post(`/slots/${slot.id}?action=save`, { body: { filename: "lily.slot" } });
  if (saved.id_slot !== slot.id || saved.n_saved !== slot.n_past || !(saved.n_written > 0))
    fail(`save ${JSON.stringify(saved)} for ${JSON.stringify(slot)}`);
  const never = await openai.completions.create(cont);
  writeFileSync(`${dir}/expected.json`, JSON.stringify({ saved: saved.n_saved, text: never.choices[0].text }));
  writeFileSync(`${dir}/bad.slot`, "not a slot file at all");
  console.log("SLOTS_SAVE_OK");
} else if (phase === "restore") {
  const expected = JSON.parse(readFileSync(`${dir}/expected.json`, "utf8"));
  if ((await slots()).some((s) => s.n_past !== 0)) fail("a new server's slots are not empty");
  for (const [file, status] of [["bad.slot", 400], ["missing.slot", 404], ["../lily.slot", 400]]) {
    try {
      await root.post("/slots/1?action=restore", { body: { filename: file } });
      fail(`restoring ${file} was accepted`);
    } catch (e) {
      if (e.status !== status) fail(`restore ${file}: ${e.status} ${e.message}, expected ${status}`);
    }
  }
  const restored = await root.post("/slots/1?action=restore", { body: { filename: "lily.slot" } });
  if (restored.n_restored !== expected.saved) fail(`restore ${JSON.stringify(restored)}`);
  const after = await slots();
  if (after[1].n_past !== expected.saved || after[0].n_past !== 0) fail(`slots after restore ${JSON.stringify(after)}`);
  const c = await openai.completions.create(cont);
  if (c.choices[0].text !== expected.text) fail(`continuation ${JSON.stringify(c.choices[0].text)} != ${JSON.stringify(expected.text)}`);
  if (!(c.usage.prompt_tokens_details.cached_tokens > 0)) fail(`the restored state was not reused: ${JSON.stringify(c.usage)}`);
  console.log("SLOTS_RESTORE_OK");
} else {
  fail("usage: node slots_choices.mjs BASE_URL save|restore DIR");
}
process.exit(0);
