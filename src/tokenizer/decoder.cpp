// Decoders: ByteLevel, ByteFallback, Fuse, Replace, Strip, Metaspace, Sequence. Each follows the
// decode_chain of HF tokenizers: a list of token strings in, a list of strings out.
#include "tokenizer/json_fields.h"
#include "tokenizer/pipeline.h"
#include "tokenizer/unicode_text.h"

namespace frugal::tok {

namespace {

// "<0xAB>" -> 0xAB, or -1.
int parse_byte_token(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::vector<std::string> byte_level(std::vector<std::string> tokens) {
  std::string bytes;
  for (const auto& t : tokens) {
    std::string mapped;
    bool all = true;
    size_t i = 0;
    while (i < t.size()) {
      const int b = unicode_to_byte(next_code_point(t, i));
      if (b < 0) { all = false; break; }
      mapped += static_cast<char>(b);
    }
    bytes += all ? mapped : t;  // a token with an unmapped char passes through as is
  }
  return {to_valid_utf8(bytes)};
}

std::vector<std::string> byte_fallback(std::vector<std::string> tokens) {
  std::vector<std::string> out;
  std::string pending;
  auto flush = [&] {
    if (pending.empty()) return;
    if (to_valid_utf8(pending) == pending) {
      out.push_back(pending);
    } else {
      for (size_t i = 0; i < pending.size(); ++i) out.emplace_back("\xEF\xBF\xBD");
    }
    pending.clear();
  };
  for (auto& t : tokens) {
    const int b = parse_byte_token(t);
    if (b >= 0) {
      pending += static_cast<char>(b);
    } else {
      flush();
      out.push_back(std::move(t));
    }
  }
  flush();
  return out;
}

std::string strip_chars(const std::string& t, const std::string& c, size_t start, size_t stop) {
  if (c.empty()) return t;
  size_t b = 0, e = t.size();
  for (size_t n = 0; n < start && e - b >= c.size() && t.compare(b, c.size(), c) == 0; ++n) b += c.size();
  for (size_t n = 0; n < stop && e - b >= c.size() && t.compare(e - c.size(), c.size(), c) == 0; ++n) e -= c.size();
  return t.substr(b, e - b);
}

}  // namespace

Result<Decoder> Decoder::parse(const json& j, const std::string& path) {
  Decoder d;
  if (!j.is_null()) FRUGAL_RETURN_IF_ERROR(d.parse_into(j, path));
  return d;
}

Status Decoder::parse_into(const json& j, const std::string& path) {
  FRUGAL_ASSIGN_OR_RETURN(std::string type, json_type(j, path));
  using K = DecoderStep::Kind;
  DecoderStep step;
  if (type == "Sequence") {
    if (!j.contains("decoders") || !j["decoders"].is_array()) return corrupt(path + ".decoders: expected an array");
    for (size_t i = 0; i < j["decoders"].size(); ++i) {
      FRUGAL_RETURN_IF_ERROR(parse_into(j["decoders"][i], path + ".decoders[" + std::to_string(i) + "]"));
    }
    return Status::ok();
  } else if (type == "ByteLevel") {
    step.kind = K::kByteLevel;
  } else if (type == "ByteFallback") {
    step.kind = K::kByteFallback;
  } else if (type == "Fuse") {
    step.kind = K::kFuse;
  } else if (type == "Replace") {
    step.kind = K::kReplace;
    FRUGAL_ASSIGN_OR_RETURN(step.to, json_string(j, "content", path));
    const json& p = json_field(j, "pattern");
    if (!p.is_object() || !p.contains("String") || !p["String"].is_string()) {
      return unsupported(path + ".pattern: only {\"String\": ...} patterns are supported in a Replace decoder");
    }
    step.from = p["String"].get<std::string>();
  } else if (type == "Strip") {
    step.kind = K::kStrip;
    FRUGAL_ASSIGN_OR_RETURN(step.content, json_string(j, "content", path));
    FRUGAL_ASSIGN_OR_RETURN(step.start, json_uint(j, "start", 0, path));
    FRUGAL_ASSIGN_OR_RETURN(step.stop, json_uint(j, "stop", 0, path));
  } else if (type == "Metaspace") {
    step.kind = K::kMetaspace;
    FRUGAL_ASSIGN_OR_RETURN(step.from, json_string(j, "replacement", path));
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
      step.prepend_first = j["prepend_scheme"].get<std::string>() != "never";
    } else {
      FRUGAL_ASSIGN_OR_RETURN(step.prepend_first, json_bool(j, "add_prefix_space", true, path));
    }
  } else {
    return unsupported(path + ": decoder type \"" + type + "\" is not supported");
  }
  steps_.push_back(std::move(step));
  return Status::ok();
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  using K = DecoderStep::Kind;
  for (const auto& step : steps_) {
    switch (step.kind) {
      case K::kByteLevel: tokens = byte_level(std::move(tokens)); break;
      case K::kByteFallback: tokens = byte_fallback(std::move(tokens)); break;
      case K::kFuse: {
        std::string all;
        for (const auto& t : tokens) all += t;
        tokens = {std::move(all)};
        break;
      }
      case K::kReplace:
        for (auto& t : tokens) t = replace_all_literal(t, step.from, step.to);
        break;
      case K::kStrip:
        for (auto& t : tokens) t = strip_chars(t, step.content, step.start, step.stop);
        break;
      case K::kMetaspace:
        for (size_t i = 0; i < tokens.size(); ++i) {
          std::string t = replace_all_literal(tokens[i], step.from, " ");
          if (i == 0 && step.prepend_first && !t.empty() && t[0] == ' ') t.erase(0, 1);
          tokens[i] = std::move(t);
        }
        break;
    }
  }
  std::string out;
  for (const auto& t : tokens) out += t;
  return to_valid_utf8(out);
}

}  // namespace frugal::tok
