#include "byte_codec.h"

namespace frugal::server::testing {

namespace {
const char* kSpecial[] = {"<unk>", "<s>", "</s>", "<think>", "</think>"};

// Length of the longest prefix of `s` made of complete UTF-8 sequences.
size_t complete_utf8_prefix(const std::string& s) {
  size_t i = 0, ok = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + len > s.size()) break;
    i += len;
    ok = i;
  }
  return ok;
}

class ByteDetok : public StreamDetokenizer {
 public:
  explicit ByteDetok(const ByteCodec& codec) : codec_(codec) {}
  std::string push(int32_t token) override {
    if (token < kByte0) {
      if (token == kThinkOpen || token == kThinkClose) buf_ += codec_.token_bytes(token);
    } else {
      buf_ += codec_.token_bytes(token);
    }
    size_t n = complete_utf8_prefix(buf_);
    std::string out = buf_.substr(0, n);
    buf_.erase(0, n);
    return out;
  }
  std::string flush() override {
    std::string out = buf_.empty() ? "" : "\xEF\xBF\xBD";
    buf_.clear();
    return out;
  }

 private:
  const ByteCodec& codec_;
  std::string buf_;
};
}  // namespace

Result<std::vector<int32_t>> ByteCodec::encode(std::string_view text, const EncodeOptions& opts) const {
  std::vector<int32_t> out;
  if (opts.add_bos) out.push_back(kBos);
  size_t i = 0;
  while (i < text.size()) {
    bool matched = false;
    if (opts.parse_special) {
      for (int32_t id = kBos; id <= kThinkClose; ++id) {
        std::string_view sp = kSpecial[id];
        if (text.substr(i, sp.size()) == sp) {
          out.push_back(id);
          i += sp.size();
          matched = true;
          break;
        }
      }
    }
    if (!matched) out.push_back(byte_token(static_cast<unsigned char>(text[i++])));
  }
  return out;
}

std::string ByteCodec::decode(const std::vector<int32_t>& tokens) const {
  std::string out;
  for (int32_t t : tokens) {
    if (t >= kByte0 || t == kThinkOpen || t == kThinkClose) out += token_bytes(t);
  }
  return out;
}

std::unique_ptr<StreamDetokenizer> ByteCodec::stream_decoder() const { return std::make_unique<ByteDetok>(*this); }

std::string ByteCodec::token_bytes(int32_t token) const {
  if (token < 0 || token >= kByteVocab) return "";
  if (token < kByte0) return kSpecial[token];
  return std::string(1, static_cast<char>(token - kByte0));
}

std::string ByteCodec::chat_template() const {
  if (cfg_.chat_template.empty()) return "";
  return "test template '" + cfg_.chat_template + "' ({{ '<think>' }})";
}

Result<std::string> ByteCodec::render_chat(const nlohmann::json& messages, const ChatRenderOptions& opts) const {
  std::string out = "<s>";
  for (const auto& m : messages) {
    out += m["role"].get<std::string>() + ": ";
    if (m["content"].is_string()) out += m["content"].get<std::string>();
    out += "\n";
  }
  if (opts.add_generation_prompt) out += cfg_.chat_template == "think" ? "assistant: <think>\n" : "assistant:";
  return out;
}

}  // namespace frugal::server::testing
