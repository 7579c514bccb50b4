// Oracle for the chat-template conformance test: renders each case with @huggingface/jinja.
// Usage: node render_oracle.mjs <node_modules dir> <cases.json> <out.json>
//   cases.json: [{"template": "...", "context": {...}}, ...]
//   out.json:   [{"ok": true, "output": "..."} | {"ok": false, "error": "..."}, ...]
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [nodeModules, casesPath, outPath] = process.argv.slice(2);
const { Template } = await import(pathToFileURL(join(nodeModules, "@huggingface/jinja/dist/index.js")).href);

const cases = JSON.parse(readFileSync(casesPath, "utf8"));
const results = cases.map(({ template, context }) => {
  try {
    return { ok: true, output: new Template(template).render(context) };
  } catch (e) {
    return { ok: false, error: String(e && e.message ? e.message : e) };
  }
});
writeFileSync(outPath, JSON.stringify(results));
