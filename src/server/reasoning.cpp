#include "server/reasoning.h"

#include <algorithm>

namespace frugal::server {

namespace {
constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Length of the longest suffix of `s` that is a proper prefix of `tag`.
size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n) {
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}
}  // namespace

ReasoningParser::ReasoningParser(bool start_in_reasoning)
    : state_(start_in_reasoning ? State::kReasoning : State::kDetectOpen) {}

ReasoningDelta ReasoningParser::push(std::string_view text) {
  pending_.append(text);
  ReasoningDelta out;
  step(out, false);
  return out;
}

ReasoningDelta ReasoningParser::finish() {
  ReasoningDelta out;
  step(out, true);
  return out;
}

void ReasoningParser::step(ReasoningDelta& out, bool at_end) {
  for (;;) {
    switch (state_) {
      case State::kDetectOpen: {
        // Leading whitespace is held until we know whether "<think>" follows.
        size_t i = 0;
        while (i < pending_.size() && is_space(pending_[i])) ++i;
        std::string_view rest = std::string_view(pending_).substr(i);
        if (rest.size() >= kOpen.size() && rest.substr(0, kOpen.size()) == kOpen) {
          pending_.erase(0, i + kOpen.size());
          state_ = State::kReasoning;
          continue;
        }
        if (!at_end && kOpen.substr(0, rest.size()) == rest) return;  // could still be "<think>"
        state_ = State::kContent;
        continue;
      }
      case State::kReasoning: {
        size_t pos = pending_.find(kClose);
        if (pos != std::string::npos) {
          out.reasoning.append(pending_, 0, pos);
          pending_.erase(0, pos + kClose.size());
          state_ = State::kContent;
          continue;
        }
        size_t hold = at_end ? 0 : partial_tag_suffix(pending_, kClose);
        out.reasoning.append(pending_, 0, pending_.size() - hold);
        pending_.erase(0, pending_.size() - hold);
        return;
      }
      case State::kContent:
        out.content.append(pending_);
        pending_.clear();
        return;
    }
  }
}

bool prompt_opens_think(std::string_view prompt) {
  size_t end = prompt.size();
  while (end > 0 && is_space(prompt[end - 1])) --end;
  prompt = prompt.substr(0, end);
  if (prompt.size() < kOpen.size() || prompt.substr(prompt.size() - kOpen.size()) != kOpen) return false;
  return true;
}

}  // namespace frugal::server
