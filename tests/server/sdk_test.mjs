// The official OpenAI Node SDK against a running server. Expectations come from the API
// reference and from self-consistency (greedy streaming == greedy non-streaming, a seed
// reproduces, a stop string cuts the greedy text at its first occurrence), so the same script
// holds for the fake engine and for the real model.
import assert from 'node:assert/strict';
import { OpenAI, client, model, apiKey, root, test, run } from './sdk_common.mjs';

const c = client();
const msgs = [{ role: 'user', content: 'Once upon a time' }];

test('models.list names the served model', async () => {
  const list = await c.models.list();
  assert.ok(list.data.some((m) => m.id === model));
});

test('chat non-streaming: shape and usage', async () => {
  const r = await c.chat.completions.create({ model, messages: msgs, max_tokens: 8, temperature: 0 });
  assert.equal(r.object, 'chat.completion');
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.model, model);
  assert.equal(typeof r.created, 'number');
  assert.equal(typeof r.system_fingerprint, 'string');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 0);
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 8);
  if (r.choices[0].finish_reason === 'length') assert.equal(r.usage.completion_tokens, 8);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

test('chat streaming equals non-streaming (greedy) and include_usage ends with a usage chunk', async () => {
  const ref = await c.chat.completions.create({ model, messages: msgs, max_tokens: 12, temperature: 0 });
  const stream = await c.chat.completions.create({ model, messages: msgs, max_tokens: 12, temperature: 0,
    stream: true, stream_options: { include_usage: true } });
  let text = '', finish = null, last = null, n = 0;
  for await (const chunk of stream) {
    n++;
    last = chunk;
    assert.equal(chunk.object, 'chat.completion.chunk');
    for (const ch of chunk.choices) {
      if (ch.delta.content) text += ch.delta.content;
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  assert.ok(n >= 2);
  assert.equal(text, ref.choices[0].message.content);
  assert.equal(finish, ref.choices[0].finish_reason);
  assert.deepEqual(last.choices, []);
  assert.deepEqual(last.usage, ref.usage);
});

test('completions non-streaming and streaming agree (greedy)', async () => {
  const ref = await c.completions.create({ model, prompt: 'Once upon a time', max_tokens: 10, temperature: 0 });
  assert.equal(ref.object, 'text_completion');
  assert.equal(typeof ref.choices[0].text, 'string');
  const stream = await c.completions.create({ model, prompt: 'Once upon a time', max_tokens: 10, temperature: 0, stream: true });
  let text = '';
  for await (const chunk of stream) for (const ch of chunk.choices) text += ch.text;
  assert.equal(text, ref.choices[0].text);
});

test('stop sequences cut the text at their first occurrence and are never emitted', async () => {
  const ref = await c.completions.create({ model, prompt: 'Once upon a time', max_tokens: 40, temperature: 0, ignore_eos: true });
  const full = ref.choices[0].text;
  assert.ok(full.length >= 8, `need some text, got ${JSON.stringify(full)}`);
  const stop = full.slice(4, 7);
  const expected = full.slice(0, full.indexOf(stop));
  for (const stream of [false, true]) {
    let text = '', finish = null;
    if (stream) {
      const s = await c.completions.create({ model, prompt: 'Once upon a time', max_tokens: 40, temperature: 0, ignore_eos: true, stop: [stop], stream });
      for await (const chunk of s) for (const ch of chunk.choices) { text += ch.text; if (ch.finish_reason) finish = ch.finish_reason; }
    } else {
      const r = await c.completions.create({ model, prompt: 'Once upon a time', max_tokens: 40, temperature: 0, ignore_eos: true, stop });
      text = r.choices[0].text; finish = r.choices[0].finish_reason;
    }
    assert.equal(text, expected, `stream=${stream} stop=${JSON.stringify(stop)}`);
    assert.equal(finish, 'stop');
  }
});

test('n = 2 gives two indexed choices; a seed reproduces them', async () => {
  const req = { model, messages: msgs, max_tokens: 16, temperature: 1.0, seed: 1234, n: 2 };
  const a = await c.chat.completions.create(req);
  const b = await c.chat.completions.create(req);
  assert.equal(a.choices.length, 2);
  assert.deepEqual(a.choices.map((x) => x.index), [0, 1]);
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  assert.equal(a.choices[1].message.content, b.choices[1].message.content);
  assert.equal(a.usage.completion_tokens, b.usage.completion_tokens);
});

test('seed reproduces a sampled completion', async () => {
  const req = { model, prompt: 'The dog', max_tokens: 16, temperature: 0.9, top_p: 0.95, seed: 99 };
  const a = await c.completions.create(req);
  const b = await c.completions.create(req);
  assert.equal(a.choices[0].text, b.choices[0].text);
});

test('chat logprobs: one entry per token, top_logprobs as asked', async () => {
  const r = await c.chat.completions.create({ model, messages: msgs, max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 2 });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, r.usage.completion_tokens);
  for (const e of content) {
    assert.equal(typeof e.token, 'string');
    assert.ok(e.logprob <= 0);
    assert.ok(Array.isArray(e.bytes));
    assert.equal(e.top_logprobs.length, 2);
  }
});

test('completions logprobs format', async () => {
  const r = await c.completions.create({ model, prompt: 'Once', max_tokens: 5, temperature: 0, logprobs: 2 });
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, r.usage.completion_tokens);
  assert.equal(lp.token_logprobs.length, lp.tokens.length);
  assert.equal(lp.top_logprobs.length, lp.tokens.length);
  assert.equal(lp.text_offset.length, lp.tokens.length);
  assert.equal(lp.text_offset[0], 0);
  for (let i = 1; i < lp.text_offset.length; i++) assert.ok(lp.text_offset[i] >= lp.text_offset[i - 1]);
});

test('errors arrive as the SDK error classes with OpenAI error objects', async () => {
  await assert.rejects(c.chat.completions.create({ model, messages: msgs, temperature: 5 }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError, String(e));
    assert.equal(e.status, 400);
    assert.equal(e.param, 'temperature');
    assert.equal(e.type, 'invalid_request_error');
    return true;
  });
  await assert.rejects(c.chat.completions.create({ model: 'no-such-model', messages: msgs }), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError, String(e));
    assert.equal(e.code, 'model_not_found');
    return true;
  });
  await assert.rejects(c.completions.create({ model, prompt: 'x'.repeat(100000), max_tokens: 1 }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError, String(e));
    assert.equal(e.code, 'context_length_exceeded');
    return true;
  });
  await assert.rejects(c.get('/no/such/route'), (e) => e instanceof OpenAI.NotFoundError);
  if (apiKey) {
    const bad = client({ apiKey: 'wrong-key' });
    await assert.rejects(bad.models.list(), (e) => {
      assert.ok(e instanceof OpenAI.AuthenticationError, String(e));
      assert.equal(e.code, 'invalid_api_key');
      return true;
    });
  }
  const health = await fetch(`${root}/health`);
  assert.equal(health.status, 200);
});

run();
