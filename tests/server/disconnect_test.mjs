// Disconnects: 50 clients abort their streams after the first content; the server must cancel
// them (running requests and KV blocks back to zero) and keep serving.
import assert from 'node:assert/strict';
import { client, model, test, run, wait_idle } from './sdk_common.mjs';

test('50 clients aborting mid-stream free their KV', async () => {
  const c = client();
  let aborted = 0;
  const one = async (i) => {
    const ctl = new AbortController();
    const stream = await c.chat.completions.create({
      model, max_tokens: 400, ignore_eos: true, temperature: 0.8, seed: i,
      messages: [{ role: 'user', content: `Tell story ${i}` }], stream: true,
    }, { signal: ctl.signal });
    try {
      for await (const chunk of stream) {
        if (chunk.choices.some((ch) => ch.finish_reason)) return;  // finished before we aborted
        if (chunk.choices.some((ch) => ch.delta.content)) { aborted++; ctl.abort(); break; }
      }
    } catch (e) {
      if (!/abort/i.test(`${e.name} ${e.message}`)) throw e;
    }
  };
  await Promise.all(Array.from({ length: 50 }, (_, i) => one(i)));
  assert.ok(aborted >= 40, `only ${aborted} of 50 streams were aborted mid-stream`);
  const idle = await wait_idle();
  assert.deepEqual(idle, { running: 0, kv: 0 });
  const r = await c.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4 });
  assert.equal(r.choices.length, 1);
});

run();
