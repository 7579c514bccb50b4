// GGUF tokenizer.ggml.* -> TokenizerData. `gpt2` vocabularies become byte-level BPE with the
// pre-tokenizer regexes llama.cpp uses for `tokenizer.ggml.pre`; `llama` vocabularies become
// SentencePiece-style score merging with byte fallback (llama.cpp's SPM tokenizer).
#include "core/mapped_file.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_data.h"

namespace frugal {

namespace {

// GGUF token types.
constexpr int64_t kTypeUnknown = 2, kTypeControl = 3, kTypeUserDefined = 4;

constexpr const char* kLlama3Regex =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Regex =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";

// The regex sequence llama.cpp applies for a `tokenizer.ggml.pre` name (llama-vocab.cpp).
Result<std::vector<std::string>> pre_regexes(const std::string& pre) {
  if (pre == "gpt-2") return std::vector<std::string>{kGpt2Regex};
  if (pre == "llama-bpe" || pre == "llama3") return std::vector<std::string>{kLlama3Regex};
  if (pre == "qwen2" || pre == "deepseek-r1-qwen") return std::vector<std::string>{kQwen2Regex};
  if (pre == "deepseek-llm") {
    return std::vector<std::string>{
        R"([\r\n])",
        // Escaped so that no editor or tool can NFC-fold the Greek and letterlike code points
        // (U+1FBE, U+1FD3, U+1FDB, U+1F7D, U+2126, U+212A would silently change).
        "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}"
        "\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}"
        "\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}"
        "\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}"
        "\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}"
        "\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}"
        "\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}"
        "\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}"
        "\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}"
        "\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}"
        "\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}"
        "\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}"
        "\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}"
        "\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}"
        "\\x{1E900}-\\x{1E943}]+",
        "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
        R"(\s+$)",
        "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+",
        R"(\p{N}+)",
    };
  }
  if (pre == "deepseek-coder") {
    return std::vector<std::string>{R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+", R"(\p{N})"};
  }
  if (pre == "deepseek-v3") {
    return std::vector<std::string>{
        R"(\p{N}{1,3})", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
        R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
  }
  return unsupported("tokenizer.ggml.pre: pre-tokenizer \"" + pre +
                     "\" is not supported (gpt-2, llama-bpe, qwen2, deepseek-llm, deepseek-coder, deepseek-v3)");
}

Status build_gpt2(const tok::GgufKv& kv, const std::vector<std::string>& tokens, tok::TokenizerData* d) {
  std::string pre = "gpt-2";
  if (kv.has("tokenizer.ggml.pre")) {
    FRUGAL_ASSIGN_OR_RETURN(pre, kv.get_string("tokenizer.ggml.pre"));
  }
  FRUGAL_ASSIGN_OR_RETURN(auto regexes, pre_regexes(pre));
  for (size_t i = 0; i < regexes.size(); ++i) {
    tok::PreTokenizerStep step{.kind = tok::PreTokenizerStep::Kind::kSplit};
    FRUGAL_ASSIGN_OR_RETURN(step.regex, tok::Regex::compile(regexes[i], "tokenizer.ggml.pre[" + std::to_string(i) + "]"));
    d->pre_tokenizer.add(std::move(step));
  }
  d->pre_tokenizer.set_byte_level(true);
  d->decoder.add(tok::DecoderStep{.kind = tok::DecoderStep::Kind::kByteLevel});
  d->model.set_vocab(tokens, {});
  FRUGAL_ASSIGN_OR_RETURN(auto merges, kv.get_strings("tokenizer.ggml.merges"));
  for (size_t i = 0; i < merges.size(); ++i) {
    const size_t sp = merges[i].find(' ');
    if (sp == std::string::npos) {
      return corrupt("tokenizer.ggml.merges[" + std::to_string(i) + "]: expected \"left right\"");
    }
    FRUGAL_RETURN_IF_ERROR(d->model.add_merge(std::string_view(merges[i]).substr(0, sp),
                                              std::string_view(merges[i]).substr(sp + 1), static_cast<int32_t>(i))
                               .with_context("tokenizer.ggml.merges"));
  }
  // llama.cpp sets ignore_merges for llama-bpe only.
  return d->model.finish(tok::BpeOptions{.byte_level = true, .ignore_merges = pre == "llama-bpe" || pre == "llama3"});
}

Status build_llama(const tok::GgufKv& kv, const std::vector<std::string>& tokens, tok::TokenizerData* d) {
  FRUGAL_ASSIGN_OR_RETURN(auto scores, kv.get_floats("tokenizer.ggml.scores"));
  if (scores.size() != tokens.size()) {
    return corrupt("tokenizer.ggml.scores: " + std::to_string(scores.size()) + " scores for " +
                   std::to_string(tokens.size()) + " tokens");
  }
  bool add_space_prefix = true;
  if (kv.has("tokenizer.ggml.add_space_prefix")) {
    FRUGAL_ASSIGN_OR_RETURN(add_space_prefix, kv.get_bool("tokenizer.ggml.add_space_prefix"));
  }
  int64_t unk = -1;
  if (kv.has("tokenizer.ggml.unknown_token_id")) {
    FRUGAL_ASSIGN_OR_RETURN(unk, kv.get_int("tokenizer.ggml.unknown_token_id"));
  }
  const std::string kSpace = "\xE2\x96\x81";
  using NK = tok::NormalizerStep::Kind;
  if (add_space_prefix) d->normalizer.add(tok::NormalizerStep{.kind = NK::kPrepend, .text = kSpace});
  d->normalizer.add(tok::NormalizerStep{.kind = NK::kReplace, .text = kSpace, .literal = " "});
  using DK = tok::DecoderStep::Kind;
  d->decoder.add(tok::DecoderStep{.kind = DK::kReplace, .from = kSpace, .to = " "});
  d->decoder.add(tok::DecoderStep{.kind = DK::kByteFallback});
  d->decoder.add(tok::DecoderStep{.kind = DK::kFuse});
  if (add_space_prefix) d->decoder.add(tok::DecoderStep{.kind = DK::kStrip, .content = " ", .start = 1});
  std::vector<float> fscores(scores.begin(), scores.end());
  d->model.set_vocab(tokens, std::move(fscores));
  if (unk >= static_cast<int64_t>(tokens.size())) return corrupt("tokenizer.ggml.unknown_token_id: out of range");
  return d->model.finish(tok::BpeOptions{.order = tok::MergeOrder::kScores, .byte_fallback = true,
                                         .unk_id = static_cast<int32_t>(unk)});
}

Status read_special_ids(const tok::GgufKv& kv, tok::TokenizerData* d) {
  auto read_id = [&](const char* key, int32_t* out) -> Status {
    if (!kv.has(key)) return Status::ok();
    FRUGAL_ASSIGN_OR_RETURN(int64_t id, kv.get_int(key));
    if (id < 0 || id >= d->vocab_size) return corrupt(std::string(key) + ": id " + std::to_string(id) + " is out of range");
    *out = static_cast<int32_t>(id);
    return Status::ok();
  };
  FRUGAL_RETURN_IF_ERROR(read_id("tokenizer.ggml.bos_token_id", &d->bos_id));
  FRUGAL_RETURN_IF_ERROR(read_id("tokenizer.ggml.eos_token_id", &d->eos_id));
  FRUGAL_RETURN_IF_ERROR(read_id("tokenizer.ggml.padding_token_id", &d->pad_id));
  if (kv.has("tokenizer.ggml.add_bos_token")) {
    FRUGAL_ASSIGN_OR_RETURN(d->add_bos_token, kv.get_bool("tokenizer.ggml.add_bos_token"));
  }
  if (kv.has("tokenizer.chat_template")) {
    FRUGAL_ASSIGN_OR_RETURN(d->chat_template, kv.get_string("tokenizer.chat_template"));
  }
  return Status::ok();
}

Result<std::unique_ptr<Tokenizer>> build_from_kv(const tok::GgufKv& kv, const std::string& source) {
  auto d = std::make_unique<tok::TokenizerData>();
  d->source = source;
  FRUGAL_ASSIGN_OR_RETURN(std::string model, kv.get_string("tokenizer.ggml.model"));
  FRUGAL_ASSIGN_OR_RETURN(auto tokens, kv.get_strings("tokenizer.ggml.tokens"));
  if (tokens.empty() || tokens.size() >= (1u << 21)) {
    return corrupt("tokenizer.ggml.tokens: " + std::to_string(tokens.size()) + " tokens (expected 1..2097151)");
  }
  std::vector<int64_t> types;
  if (kv.has("tokenizer.ggml.token_type")) {
    FRUGAL_ASSIGN_OR_RETURN(types, kv.get_ints("tokenizer.ggml.token_type"));
    if (types.size() != tokens.size()) return corrupt("tokenizer.ggml.token_type: length differs from tokens");
  }
  if (model == "gpt2") {
    FRUGAL_RETURN_IF_ERROR(build_gpt2(kv, tokens, d.get()));
  } else if (model == "llama") {
    FRUGAL_RETURN_IF_ERROR(build_llama(kv, tokens, d.get()));
  } else {
    return unsupported("tokenizer.ggml.model: \"" + model + "\" is not supported (gpt2, llama)");
  }
  // Control, unknown and user-defined tokens are matched in the text as added tokens.
  for (size_t i = 0; i < types.size(); ++i) {
    const int64_t t = types[i];
    if (t != kTypeControl && t != kTypeUnknown && t != kTypeUserDefined) continue;
    d->added.push_back(tok::AddedToken{.id = static_cast<int32_t>(i), .content = tokens[i],
                                       .special = t != kTypeUserDefined, .normalized = false});
  }
  FRUGAL_RETURN_IF_ERROR(d->finalize());
  FRUGAL_RETURN_IF_ERROR(read_special_ids(kv, d.get()));
  return std::make_unique<Tokenizer>(std::move(d));
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf_bytes(const uint8_t* data, size_t size,
                                                              const std::string& name) {
  FRUGAL_ASSIGN_OR_RETURN(tok::GgufKv kv, tok::GgufKv::parse(data, size, name));
  auto r = build_from_kv(kv, name);
  if (!r.is_ok()) return r.status().with_context(name);
  return r;
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::load_gguf(const std::string& path) {
  FRUGAL_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  return from_gguf_bytes(file.data(), file.size(), path);
}

}  // namespace frugal
