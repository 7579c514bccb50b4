// Normalizers: NFC/NFD/NFKC/NFKD, Lowercase, Prepend, Replace, Strip, Sequence.
#include "tokenizer/json_fields.h"
#include "tokenizer/pipeline.h"
#include "tokenizer/unicode_text.h"

namespace frugal::tok {

namespace {

// Replace's pattern: {"String": "..."} or {"Regex": "..."}.
Status parse_pattern(const json& j, const std::string& path, std::string* literal, Regex* regex,
                     bool* use_regex) {
  if (!j.is_object()) return corrupt(path + ": expected {\"String\": ...} or {\"Regex\": ...}");
  if (j.contains("String") && j["String"].is_string()) {
    *literal = j["String"].get<std::string>();
    *use_regex = false;
    return Status::ok();
  }
  if (j.contains("Regex") && j["Regex"].is_string()) {
    FRUGAL_ASSIGN_OR_RETURN(*regex, Regex::compile(j["Regex"].get<std::string>(), path));
    *use_regex = true;
    return Status::ok();
  }
  return corrupt(path + ": expected {\"String\": ...} or {\"Regex\": ...}");
}

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  if (from.empty()) return std::string(text);
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t hit = text.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(text.substr(pos));
  return out;
}

std::string strip(std::string_view text, bool left, bool right) {
  size_t b = 0, e = text.size();
  if (left) {
    while (b < e) {
      size_t i = b;
      if (!is_whitespace(next_code_point(text, i))) break;
      b = i;
    }
  }
  if (right) {
    while (e > b) {
      size_t s = e - 1;
      while (s > b && (static_cast<uint8_t>(text[s]) & 0xC0) == 0x80) --s;
      size_t i = s;
      if (!is_whitespace(next_code_point(text, i))) break;
      e = s;
    }
  }
  return std::string(text.substr(b, e - b));
}

}  // namespace

std::string replace_all_literal(std::string_view text, std::string_view from, std::string_view to) {
  return replace_all(text, from, to);
}

Result<Normalizer> Normalizer::parse(const json& j, const std::string& path) {
  Normalizer n;
  if (!j.is_null()) FRUGAL_RETURN_IF_ERROR(n.parse_into(j, path));
  return n;
}

Status Normalizer::parse_into(const json& j, const std::string& path) {
  FRUGAL_ASSIGN_OR_RETURN(std::string type, json_type(j, path));
  using K = NormalizerStep::Kind;
  if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array()) {
      return corrupt(path + ".normalizers: expected an array");
    }
    for (size_t i = 0; i < j["normalizers"].size(); ++i) {
      FRUGAL_RETURN_IF_ERROR(parse_into(j["normalizers"][i], path + ".normalizers[" + std::to_string(i) + "]"));
    }
    return Status::ok();
  }
  NormalizerStep step;
  if (type == "NFC") step.kind = K::kNfc;
  else if (type == "NFD") step.kind = K::kNfd;
  else if (type == "NFKC") step.kind = K::kNfkc;
  else if (type == "NFKD") step.kind = K::kNfkd;
  else if (type == "Lowercase") step.kind = K::kLowercase;
  else if (type == "Prepend") {
    step.kind = K::kPrepend;
    FRUGAL_ASSIGN_OR_RETURN(step.text, json_string(j, "prepend", path));
  } else if (type == "Replace") {
    step.kind = K::kReplace;
    FRUGAL_ASSIGN_OR_RETURN(step.text, json_string(j, "content", path));
    FRUGAL_RETURN_IF_ERROR(parse_pattern(json_field(j, "pattern"), path + ".pattern", &step.literal,
                                         &step.regex, &step.use_regex));
  } else if (type == "Strip") {
    step.kind = K::kStrip;
    FRUGAL_ASSIGN_OR_RETURN(step.left, json_bool(j, "strip_left", true, path));
    FRUGAL_ASSIGN_OR_RETURN(step.right, json_bool(j, "strip_right", true, path));
  } else {
    return unsupported(path + ": normalizer type \"" + type + "\" is not supported");
  }
  steps_.push_back(std::move(step));
  return Status::ok();
}

std::string Normalizer::apply(std::string_view text) const {
  std::string s(text);
  using K = NormalizerStep::Kind;
  for (const auto& step : steps_) {
    switch (step.kind) {
      case K::kNfc: s = normalize(s, NormalForm::kNfc); break;
      case K::kNfd: s = normalize(s, NormalForm::kNfd); break;
      case K::kNfkc: s = normalize(s, NormalForm::kNfkc); break;
      case K::kNfkd: s = normalize(s, NormalForm::kNfkd); break;
      case K::kLowercase: s = to_lower(s); break;
      case K::kPrepend:
        if (!s.empty()) s = step.text + s;
        break;
      case K::kReplace:
        if (!step.use_regex) {
          s = replace_all(s, step.literal, step.text);
        } else {
          std::vector<std::pair<size_t, size_t>> m;
          step.regex.find_all(s, m);
          std::string out;
          size_t pos = 0;
          for (auto [b, e] : m) {
            out.append(s, pos, b - pos);
            out += step.text;
            pos = e;
          }
          out.append(s, pos);
          s = std::move(out);
        }
        break;
      case K::kStrip: s = strip(s, step.left, step.right); break;
    }
  }
  return s;
}

}  // namespace frugal::tok
