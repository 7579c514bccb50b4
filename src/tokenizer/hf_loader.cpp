// tokenizer.json + tokenizer_config.json -> TokenizerData.
#include <filesystem>

#include "core/mapped_file.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_data.h"

namespace frugal {

using tok::json;

namespace {

constexpr int32_t kMaxVocab = 1 << 21;  // 2M ids: far above real vocabularies, bounded memory

Status parse_vocab(const json& model, std::vector<std::string>* tokens) {
  const json& vocab = tok::json_field(model, "vocab");
  if (!vocab.is_object()) return corrupt("model.vocab: expected an object {token: id}");
  int32_t n = 0;
  for (const auto& [text, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxVocab) {
      return corrupt("model.vocab[\"" + text + "\"]: expected an id in 0.." + std::to_string(kMaxVocab - 1));
    }
    n = std::max(n, static_cast<int32_t>(id.get<int64_t>()) + 1);
  }
  tokens->assign(n, {});
  for (const auto& [text, id] : vocab.items()) {
    auto& slot = (*tokens)[id.get<int64_t>()];
    if (!slot.empty()) {
      return corrupt("model.vocab: id " + std::to_string(id.get<int64_t>()) + " is used by both \"" + slot +
                     "\" and \"" + text + "\"");
    }
    slot = text;
  }
  return Status::ok();
}

Status parse_merges(const json& model, tok::BpeModel* bpe) {
  const json& merges = tok::json_field(model, "merges");
  if (merges.is_null()) return Status::ok();
  if (!merges.is_array()) return corrupt("model.merges: expected an array");
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    std::string left, right;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        return corrupt("model.merges[" + std::to_string(i) + "]: expected \"left right\", got \"" + s + "\"");
      }
      left = s.substr(0, sp);
      right = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      return corrupt("model.merges[" + std::to_string(i) + "]: expected \"left right\" or [left, right]");
    }
    FRUGAL_RETURN_IF_ERROR(bpe->add_merge(left, right, static_cast<int32_t>(i)).with_context("model"));
  }
  return Status::ok();
}

Status parse_model(const json& model, bool byte_level, tok::BpeModel* bpe) {
  FRUGAL_ASSIGN_OR_RETURN(std::string type, tok::json_type(model, "model"));
  if (type != "BPE") return unsupported("model.type: \"" + type + "\" is not supported (only BPE)");
  if (model.contains("dropout") && !model["dropout"].is_null()) {
    return unsupported("model.dropout: BPE dropout is not supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty()) {
      return unsupported(std::string("model.") + key + ": a non-empty value is not supported");
    }
  }
  std::vector<std::string> tokens;
  FRUGAL_RETURN_IF_ERROR(parse_vocab(model, &tokens));
  bpe->set_vocab(std::move(tokens), {});
  FRUGAL_RETURN_IF_ERROR(parse_merges(model, bpe));
  tok::BpeOptions opt{.byte_level = byte_level};
  FRUGAL_ASSIGN_OR_RETURN(opt.ignore_merges, tok::json_bool(model, "ignore_merges", false, "model"));
  FRUGAL_ASSIGN_OR_RETURN(opt.byte_fallback, tok::json_bool(model, "byte_fallback", false, "model"));
  FRUGAL_ASSIGN_OR_RETURN(opt.fuse_unk, tok::json_bool(model, "fuse_unk", false, "model"));
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    const std::string unk = model["unk_token"].get<std::string>();
    opt.unk_id = bpe->token_id(unk);
    if (opt.unk_id < 0) return corrupt("model.unk_token: \"" + unk + "\" is not in the vocab");
  }
  return bpe->finish(opt);
}

Status parse_added_tokens(const json& root, std::vector<tok::AddedToken>* added) {
  const json& list = tok::json_field(root, "added_tokens");
  if (list.is_null()) return Status::ok();
  if (!list.is_array()) return corrupt("added_tokens: expected an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = "added_tokens[" + std::to_string(i) + "]";
    const json& a = list[i];
    tok::AddedToken t;
    FRUGAL_ASSIGN_OR_RETURN(t.content, tok::json_string(a, "content", path));
    if (!a.contains("id") || !a["id"].is_number_integer()) return corrupt(path + ".id: expected an integer");
    const int64_t id = a["id"].get<int64_t>();
    if (id < 0 || id >= kMaxVocab) return corrupt(path + ".id: " + std::to_string(id) + " is out of range");
    t.id = static_cast<int32_t>(id);
    FRUGAL_ASSIGN_OR_RETURN(t.special, tok::json_bool(a, "special", false, path));
    FRUGAL_ASSIGN_OR_RETURN(t.normalized, tok::json_bool(a, "normalized", !t.special, path));
    FRUGAL_ASSIGN_OR_RETURN(t.lstrip, tok::json_bool(a, "lstrip", false, path));
    FRUGAL_ASSIGN_OR_RETURN(t.rstrip, tok::json_bool(a, "rstrip", false, path));
    FRUGAL_ASSIGN_OR_RETURN(t.single_word, tok::json_bool(a, "single_word", false, path));
    added->push_back(std::move(t));
  }
  return Status::ok();
}

// TemplateProcessing's "single" template -> ids before/after the sequence. ByteLevel changes only
// offsets; a Sequence may hold both.
Status parse_post_processor(const json& j, const std::string& path, tok::TokenizerData* d) {
  if (j.is_null()) return Status::ok();
  FRUGAL_ASSIGN_OR_RETURN(std::string type, tok::json_type(j, path));
  if (type == "ByteLevel") return Status::ok();
  if (type == "Sequence") {
    const json& list = tok::json_field(j, "processors");
    if (!list.is_array()) return corrupt(path + ".processors: expected an array");
    for (size_t i = 0; i < list.size(); ++i) {
      FRUGAL_RETURN_IF_ERROR(parse_post_processor(list[i], path + ".processors[" + std::to_string(i) + "]", d));
    }
    return Status::ok();
  }
  if (type != "TemplateProcessing") {
    return unsupported(path + ": post-processor type \"" + type + "\" is not supported");
  }
  const json& single = tok::json_field(j, "single");
  const json& specials = tok::json_field(j, "special_tokens");
  if (!single.is_array()) return corrupt(path + ".single: expected an array");
  bool after = false;
  d->has_template = true;
  for (size_t i = 0; i < single.size(); ++i) {
    const json& item = single[i];
    const std::string ipath = path + ".single[" + std::to_string(i) + "]";
    if (item.contains("Sequence")) {
      after = true;
      continue;
    }
    if (!item.contains("SpecialToken") || !item["SpecialToken"].is_object()) {
      return corrupt(ipath + ": expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    }
    FRUGAL_ASSIGN_OR_RETURN(std::string name, tok::json_string(item["SpecialToken"], "id", ipath + ".SpecialToken"));
    const json& spec = tok::json_field(specials, name.c_str());
    if (!spec.is_object() || !spec.contains("ids") || !spec["ids"].is_array()) {
      return corrupt(path + ".special_tokens[\"" + name + "\"].ids: expected an array");
    }
    for (const auto& id : spec["ids"]) {
      if (!id.is_number_integer()) return corrupt(path + ".special_tokens[\"" + name + "\"].ids: expected integers");
      (after ? d->template_after : d->template_before).push_back(id.get<int32_t>());
    }
  }
  return Status::ok();
}

// "bos_token": "<s>" | {"content": "<s>", ...} | null.
std::string config_token(const json& cfg, const char* key) {
  if (!cfg.contains(key)) return {};
  const json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return {};
}

Status parse_config(const json& cfg, const Tokenizer& probe, tok::TokenizerData* d) {
  auto resolve = [&](const char* key, int32_t* id) -> Status {
    const std::string text = config_token(cfg, key);
    if (text.empty()) return Status::ok();
    *id = probe.token_id(text);
    if (*id < 0) return corrupt(std::string("tokenizer_config.json: ") + key + " \"" + text + "\" is not a token");
    return Status::ok();
  };
  FRUGAL_RETURN_IF_ERROR(resolve("bos_token", &d->bos_id));
  FRUGAL_RETURN_IF_ERROR(resolve("eos_token", &d->eos_id));
  FRUGAL_RETURN_IF_ERROR(resolve("pad_token", &d->pad_id));
  if (cfg.contains("add_bos_token")) {
    if (!cfg["add_bos_token"].is_boolean()) return corrupt("tokenizer_config.json: add_bos_token: expected true or false");
    d->add_bos_token = cfg["add_bos_token"].get<bool>();
  }
  if (cfg.contains("chat_template")) {
    const json& t = cfg["chat_template"];
    if (t.is_string()) {
      d->chat_template = t.get<std::string>();
    } else if (t.is_array()) {
      for (const auto& e : t) {
        if (e.is_object() && e.value("name", "") == "default" && e.contains("template") && e["template"].is_string()) {
          d->chat_template = e["template"].get<std::string>();
        }
      }
    } else if (!t.is_null()) {
      return corrupt("tokenizer_config.json: chat_template: expected a string or a list of {name, template}");
    }
  }
  return Status::ok();
}

Result<json> parse_json_text(std::string_view text, const std::string& name) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return corrupt(name + ": not valid JSON (truncated or malformed)");
  if (!j.is_object()) return corrupt(name + ": expected a JSON object at the top level");
  return j;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_json(std::string_view tokenizer_json, std::string_view config_json,
                                                        const std::string& source) {
  auto build = [&]() -> Result<std::unique_ptr<Tokenizer>> {
    FRUGAL_ASSIGN_OR_RETURN(json root, parse_json_text(tokenizer_json, "tokenizer.json"));
    auto d = std::make_unique<tok::TokenizerData>();
    d->source = source;
    FRUGAL_ASSIGN_OR_RETURN(d->normalizer, tok::Normalizer::parse(tok::json_field(root, "normalizer"), "normalizer"));
    FRUGAL_ASSIGN_OR_RETURN(d->pre_tokenizer,
                            tok::PreTokenizer::parse(tok::json_field(root, "pre_tokenizer"), "pre_tokenizer"));
    FRUGAL_ASSIGN_OR_RETURN(d->decoder, tok::Decoder::parse(tok::json_field(root, "decoder"), "decoder"));
    if (!root.contains("model")) return corrupt("model: missing");
    FRUGAL_RETURN_IF_ERROR(parse_model(root["model"], d->pre_tokenizer.byte_level(), &d->model));
    FRUGAL_RETURN_IF_ERROR(parse_added_tokens(root, &d->added));
    FRUGAL_RETURN_IF_ERROR(parse_post_processor(tok::json_field(root, "post_processor"), "post_processor", d.get()));
    // Without a config, BOS is added when the template adds something in front.
    d->add_bos_token = d->has_template && !d->template_before.empty();
    if (d->template_before.size() == 1) d->bos_id = d->template_before[0];
    FRUGAL_RETURN_IF_ERROR(d->finalize());
    auto* data = d.get();
    auto tokenizer = std::make_unique<Tokenizer>(std::move(d));
    if (!config_json.empty()) {
      FRUGAL_ASSIGN_OR_RETURN(json cfg, parse_json_text(config_json, "tokenizer_config.json"));
      FRUGAL_RETURN_IF_ERROR(parse_config(cfg, *tokenizer, data));
    }
    return tokenizer;
  };
  auto r = build();
  if (!r.is_ok()) return r.status().with_context(source);
  return r;
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::load(const std::string& model_dir) {
  const std::string json_path = model_dir + "/tokenizer.json";
  const std::string config_path = model_dir + "/tokenizer_config.json";
  if (!file_exists(json_path)) return not_found(json_path + ": no tokenizer.json in the model directory");
  FRUGAL_ASSIGN_OR_RETURN(std::string text, read_file(json_path));
  std::string config;
  if (file_exists(config_path)) {
    FRUGAL_ASSIGN_OR_RETURN(config, read_file(config_path));
  }
  return from_json(text, config, model_dir);
}

}  // namespace frugal
