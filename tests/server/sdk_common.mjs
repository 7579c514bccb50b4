// Shared helpers for the node tests: the official OpenAI SDK from tests/oracles, a tiny runner,
// and /metrics parsing. Usage of every script: node <script> BASE_URL MODEL API_KEY
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../oracles/package.json'));
export const OpenAI = require('openai').default ?? require('openai');

export const [baseURL, model, apiKey] = process.argv.slice(2);
export const root = baseURL.replace(/\/v1\/?$/, '');

export function client(opts = {}) {
  return new OpenAI({ baseURL, apiKey: apiKey || 'none', maxRetries: 0, timeout: 120_000, ...opts });
}

const tests = [];
export function test(name, fn) { tests.push({ name, fn }); }
export async function run() {
  let failed = 0;
  for (const t of tests) {
    const t0 = Date.now();
    try {
      await t.fn();
      console.log(`ok   ${t.name} (${Date.now() - t0} ms)`);
    } catch (e) {
      failed++;
      console.log(`FAIL ${t.name}: ${e && e.stack ? e.stack : e}`);
    }
  }
  console.log(`${tests.length - failed}/${tests.length} passed`);
  process.exit(failed ? 1 : 0);
}

export async function metric(name) {
  const text = await (await fetch(`${root}/metrics`)).text();
  const m = text.match(new RegExp(`^${name} (\\S+)$`, 'm'));
  if (!m) throw new Error(`metric ${name} missing from /metrics`);
  return Number(m[1]);
}

// Polls until running requests and KV blocks in use are both zero (bounded).
export async function wait_idle(ms = 15_000) {
  const deadline = Date.now() + ms;
  let running, kv;
  do {
    running = await metric('frugal_num_requests_running');
    kv = await metric('frugal_kv_cache_blocks_used');
    if (running === 0 && kv === 0) return { running, kv };
    await new Promise((r) => setTimeout(r, 50));
  } while (Date.now() < deadline);
  return { running, kv };
}
