// Reference tokenizer for the differential test: @huggingface/tokenizers (a JS port of HF
// tokenizers) under Node. Usage: node js_reference.mjs TOKENIZER_DIR INPUT.json
// INPUT.json: {"texts": [...], "add_special_tokens": false}. Prints {"ids": [[...]], "text": [...]}
// where text[i] is decode(ids[i]) without cleanup.
import fs from "node:fs";
import path from "node:path";

const [dir, inputPath] = process.argv.slice(2);
const oracles = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../oracles/node_modules");
const { Tokenizer } = await import(path.join(oracles, "@huggingface/tokenizers/dist/tokenizers.mjs"));

const tokenizerJson = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
const configPath = path.join(dir, "tokenizer_config.json");
const config = fs.existsSync(configPath) ? JSON.parse(fs.readFileSync(configPath, "utf8")) : {};
const tok = new Tokenizer(tokenizerJson, config);
const input = JSON.parse(fs.readFileSync(inputPath, "utf8"));
const ids = [], text = [];
for (const t of input.texts) {
  const e = tok.encode(t, { add_special_tokens: !!input.add_special_tokens });
  ids.push(e.ids);
  text.push(e.ids.length === 0 ? "" :
            tok.decode(e.ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }));
}
process.stdout.write(JSON.stringify({ ids, text }));
