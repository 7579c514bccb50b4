// Pre-tokenizers: Split, ByteLevel, Metaspace, Digits, Punctuation, Sequence.
#include <algorithm>

#include "tokenizer/json_fields.h"
#include "tokenizer/pipeline.h"

namespace frugal::tok {

namespace {

// GPT-2's word regex, used by ByteLevel with use_regex.
constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

Result<SplitBehavior> parse_behavior(const json& j, const std::string& path) {
  FRUGAL_ASSIGN_OR_RETURN(std::string b, json_string(j, "behavior", path));
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  return unsupported(path + ".behavior: \"" + b + "\" is not a supported split behavior");
}

Result<Regex> parse_split_pattern(const json& j, const std::string& path) {
  const json& p = json_field(j, "pattern");
  if (p.is_object() && p.contains("Regex") && p["Regex"].is_string()) {
    return Regex::compile(p["Regex"].get<std::string>(), path + ".pattern");
  }
  if (p.is_object() && p.contains("String") && p["String"].is_string()) {
    return Regex::compile(Regex::quote(p["String"].get<std::string>()), path + ".pattern");
  }
  return corrupt(path + ".pattern: expected {\"Regex\": ...} or {\"String\": ...}");
}

struct Span {
  size_t begin, end;
  bool is_match;
};

}  // namespace

void split_by_regex(std::string_view text, const Regex& re, SplitBehavior behavior, bool invert,
                    std::vector<std::pair<size_t, size_t>>& out,
                    std::vector<std::pair<size_t, size_t>>& matches) {
  out.clear();
  matches.clear();
  re.find_all(text, matches);
  if (matches.empty() && !invert) {
    if (!text.empty()) out.emplace_back(0, text.size());
    return;
  }
  // Cover the text with alternating gap/match spans; `invert` swaps which side is the delimiter.
  thread_local std::vector<Span> spans;
  spans.clear();
  size_t pos = 0;
  for (auto [b, e] : matches) {
    if (b > pos) spans.push_back({pos, b, invert});
    spans.push_back({b, e, !invert});
    pos = e;
  }
  if (pos < text.size()) spans.push_back({pos, text.size(), invert});

  bool prev_match = false;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const auto& s : spans) if (!s.is_match) out.emplace_back(s.begin, s.end);
      break;
    case SplitBehavior::kIsolated:
      for (const auto& s : spans) out.emplace_back(s.begin, s.end);
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const auto& s : spans) {
        if (s.is_match && !prev_match && !out.empty()) out.back().second = s.end;
        else out.emplace_back(s.begin, s.end);
        prev_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !prev_match && !out.empty()) out.back().first = it->begin;
        else out.emplace_back(it->begin, it->end);
        prev_match = it->is_match;
      }
      std::reverse(out.begin(), out.end());
      break;
    case SplitBehavior::kContiguous:
      for (size_t i = 0; i < spans.size(); ++i) {
        if (i > 0 && spans[i].is_match == prev_match) out.back().second = spans[i].end;
        else out.emplace_back(spans[i].begin, spans[i].end);
        prev_match = spans[i].is_match;
      }
      break;
  }
  std::erase_if(out, [](const auto& r) { return r.second <= r.first; });
}

Result<PreTokenizer> PreTokenizer::parse(const json& j, const std::string& path) {
  PreTokenizer p;
  if (!j.is_null()) FRUGAL_RETURN_IF_ERROR(p.parse_into(j, path));
  return p;
}

Status PreTokenizer::parse_into(const json& j, const std::string& path) {
  FRUGAL_ASSIGN_OR_RETURN(std::string type, json_type(j, path));
  if (byte_level_) {
    return unsupported(path + ": a pre-tokenizer after ByteLevel is not supported (ByteLevel must be last)");
  }
  using K = PreTokenizerStep::Kind;
  PreTokenizerStep step;
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array()) {
      return corrupt(path + ".pretokenizers: expected an array");
    }
    for (size_t i = 0; i < j["pretokenizers"].size(); ++i) {
      FRUGAL_RETURN_IF_ERROR(
          parse_into(j["pretokenizers"][i], path + ".pretokenizers[" + std::to_string(i) + "]"));
    }
    return Status::ok();
  } else if (type == "Split") {
    step.kind = K::kSplit;
    FRUGAL_ASSIGN_OR_RETURN(step.regex, parse_split_pattern(j, path));
    FRUGAL_ASSIGN_OR_RETURN(step.behavior, parse_behavior(j, path));
    FRUGAL_ASSIGN_OR_RETURN(step.invert, json_bool(j, "invert", false, path));
  } else if (type == "ByteLevel") {
    step.kind = K::kByteLevel;
    FRUGAL_ASSIGN_OR_RETURN(step.add_prefix_space, json_bool(j, "add_prefix_space", true, path));
    FRUGAL_ASSIGN_OR_RETURN(step.use_regex, json_bool(j, "use_regex", true, path));
    FRUGAL_ASSIGN_OR_RETURN(step.regex, Regex::compile(kGpt2Pattern, path + " (GPT-2 regex)"));
    byte_level_ = true;
  } else if (type == "Metaspace") {
    step.kind = K::kMetaspace;
    FRUGAL_ASSIGN_OR_RETURN(step.replacement, json_string(j, "replacement", path));
    FRUGAL_ASSIGN_OR_RETURN(step.split, json_bool(j, "split", true, path));
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
      const std::string s = j["prepend_scheme"].get<std::string>();
      if (s == "always") step.prepend = PreTokenizerStep::Prepend::kAlways;
      else if (s == "first") step.prepend = PreTokenizerStep::Prepend::kFirst;
      else if (s == "never") step.prepend = PreTokenizerStep::Prepend::kNever;
      else return unsupported(path + ".prepend_scheme: \"" + s + "\" is not supported");
    } else {
      FRUGAL_ASSIGN_OR_RETURN(bool add, json_bool(j, "add_prefix_space", true, path));
      step.prepend = add ? PreTokenizerStep::Prepend::kAlways : PreTokenizerStep::Prepend::kNever;
    }
    FRUGAL_ASSIGN_OR_RETURN(step.regex, Regex::compile(Regex::quote(step.replacement), path));
  } else if (type == "Digits") {
    step.kind = K::kDigits;
    FRUGAL_ASSIGN_OR_RETURN(bool individual, json_bool(j, "individual_digits", false, path));
    FRUGAL_ASSIGN_OR_RETURN(step.regex, Regex::compile(individual ? "\\p{N}" : "\\p{N}+", path));
  } else if (type == "Punctuation") {
    step.kind = K::kPunctuation;
    if (j.contains("behavior")) {
      FRUGAL_ASSIGN_OR_RETURN(step.behavior, parse_behavior(j, path));
    }
    // Rust's is_ascii_punctuation || Unicode P: one char per match, merged by `behavior`.
    FRUGAL_ASSIGN_OR_RETURN(step.regex, Regex::compile("[\\p{P}!-/:-@\\[-`{-~]", path));
  } else {
    return unsupported(path + ": pre-tokenizer type \"" + type + "\" is not supported");
  }
  steps_.push_back(std::move(step));
  return Status::ok();
}

namespace {
// Range buffers per step depth. Depth d is only used by step d, and recursion only goes deeper,
// so iterating depth d's ranges while deeper steps run is safe.
thread_local std::vector<std::vector<std::pair<size_t, size_t>>> ranges_by_depth, scratch_by_depth;
}  // namespace

void PreTokenizer::apply(std::string_view segment, bool at_start, const WordSink& sink) const {
  if (ranges_by_depth.size() < steps_.size()) {  // resize only here: it moves the inner buffers
    ranges_by_depth.resize(steps_.size());
    scratch_by_depth.resize(steps_.size());
  }
  run(0, segment, at_start, sink);
}

// Applies step `si` to one piece and recurses into the rest of the chain for each result, so
// words reach the sink in order without intermediate lists of strings.
void PreTokenizer::run(size_t si, std::string_view piece, bool first, const WordSink& sink) const {
  if (si == steps_.size()) {
    if (!piece.empty()) sink(piece);
    return;
  }
  const auto& step = steps_[si];
  auto split_and_recurse = [&](std::string_view text, const Regex& re, SplitBehavior behavior, bool invert) {
    auto& ranges = ranges_by_depth[si];
    split_by_regex(text, re, behavior, invert, ranges, scratch_by_depth[si]);
    for (size_t k = 0; k < ranges.size(); ++k) {
      run(si + 1, text.substr(ranges[k].first, ranges[k].second - ranges[k].first), first && k == 0, sink);
    }
  };
  using K = PreTokenizerStep::Kind;
  switch (step.kind) {
    case K::kSplit:
      split_and_recurse(piece, step.regex, step.behavior, step.invert);
      break;
    case K::kDigits:
      split_and_recurse(piece, step.regex, SplitBehavior::kIsolated, false);
      break;
    case K::kPunctuation:
      split_and_recurse(piece, step.regex, step.behavior, false);
      break;
    case K::kByteLevel: {
      std::string prefixed;
      std::string_view text = piece;
      if (step.add_prefix_space && (piece.empty() || piece[0] != ' ')) {
        prefixed = " " + std::string(piece);
        text = prefixed;
      }
      if (step.use_regex) split_and_recurse(text, step.regex, SplitBehavior::kIsolated, false);
      else run(si + 1, text, first, sink);
      break;
    }
    case K::kMetaspace: {
      std::string s = replace_all_literal(piece, " ", step.replacement);
      const bool prepend = step.prepend == PreTokenizerStep::Prepend::kAlways ||
                           (step.prepend == PreTokenizerStep::Prepend::kFirst && first);
      if (prepend && s.compare(0, step.replacement.size(), step.replacement) != 0) s = step.replacement + s;
      if (step.split) split_and_recurse(s, step.regex, SplitBehavior::kMergedWithNext, false);
      else run(si + 1, s, first, sink);
      break;
    }
  }
}

}  // namespace frugal::tok
