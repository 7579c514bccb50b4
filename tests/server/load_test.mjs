// Load: N concurrent streaming chat requests (default 1000), bounded in time. Every stream must
// complete ([DONE] seen, a finish_reason, a usage chunk) with a token count that matches the
// logprob entries streamed (one per generated token), and no request may fail. Afterwards
// /metrics must show zero running requests and zero KV blocks in use.
import assert from 'node:assert/strict';
import { client, model, test, run, wait_idle } from './sdk_common.mjs';

const N = Number(process.env.FRUGAL_LOAD_N || 1000);
const MAX_TOKENS = 8;

test(`${N} concurrent streaming chat requests all complete`, async () => {
  const c = client({ timeout: 240_000 });
  const one = async (i) => {
    const stream = await c.chat.completions.create({
      model, max_tokens: MAX_TOKENS, temperature: 0.8, seed: i, logprobs: true,
      messages: [{ role: 'user', content: `Story number ${i}` }],
      stream: true, stream_options: { include_usage: true },
    });
    let entries = 0, finish = null, usage = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const ch of chunk.choices) {
        if (ch.logprobs && ch.logprobs.content) entries += ch.logprobs.content.length;
        if (ch.finish_reason) finish = ch.finish_reason;
      }
    }
    assert.ok(finish === 'stop' || finish === 'length', `request ${i}: finish ${finish}`);
    assert.ok(usage, `request ${i}: no usage chunk`);
    assert.equal(usage.completion_tokens, entries, `request ${i}`);
    assert.ok(entries >= 1 && entries <= MAX_TOKENS);
    if (finish === 'length') assert.equal(entries, MAX_TOKENS);
    return entries;
  };
  const t0 = Date.now();
  const results = await Promise.allSettled(Array.from({ length: N }, (_, i) => one(i)));
  const failed = results.filter((r) => r.status === 'rejected');
  if (failed.length) throw new Error(`${failed.length}/${N} failed; first: ${failed[0].reason}`);
  const tokens = results.reduce((a, r) => a + r.value, 0);
  console.log(`  ${N} streams, ${tokens} tokens in ${Date.now() - t0} ms`);
  const idle = await wait_idle();
  assert.deepEqual(idle, { running: 0, kv: 0 });
});

run();
