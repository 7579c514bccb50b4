#include "server/stop_matcher.h"

#include <algorithm>

namespace frugal::server {

StopMatcher::StopMatcher(std::unique_ptr<StreamDetokenizer> detok, std::vector<std::string> stops)
    : detok_(std::move(detok)), stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

TextDelta StopMatcher::release(size_t upto) {
  TextDelta d;
  d.text = text_.substr(sent_, upto - sent_);
  sent_ = upto;
  // A token is released once all of its text is (a token holding the first bytes of a split
  // UTF-8 character has empty text and goes out with the text before it).
  size_t n = 0;
  while (n < pending_.size() && pending_[n].end <= upto) ++n;
  for (size_t i = 0; i < n; ++i) d.tokens.push_back({pending_[i].token, pending_[i].start});
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
  return d;
}

size_t StopMatcher::find_stop() const {
  // A stop string cannot start inside released text (its prefix would have been held back).
  size_t best = std::string::npos;
  for (const auto& s : stops_) {
    size_t pos = text_.find(s, sent_);
    if (pos != std::string::npos) best = std::min(best, pos);
  }
  return best;
}

size_t StopMatcher::partial_start() const {
  size_t hold = 0;  // the longest unreleased suffix that is a proper prefix of a stop string
  for (const auto& s : stops_) {
    for (size_t n = std::min(s.size() - 1, text_.size() - sent_); n > hold; --n) {
      if (text_.compare(text_.size() - n, n, s, 0, n) == 0) {
        hold = n;
        break;
      }
    }
  }
  return text_.size() - hold;
}

TextDelta StopMatcher::cut(size_t at) {
  stopped_ = true;
  text_.resize(at);
  // Tokens that contributed to the kept text are reported; the rest went into the stop.
  std::erase_if(pending_, [&](const Pending& p) { return p.start >= at; });
  for (auto& p : pending_) p.end = std::min(p.end, at);
  TextDelta d = release(at);
  d.stopped = true;
  return d;
}

TextDelta StopMatcher::push(const std::vector<runtime::GeneratedToken>& tokens) {
  if (stopped_) return {};
  size_t at = std::string::npos;  // where the earliest stop starts, after the last token
  for (const auto& t : tokens) {
    size_t start = text_.size();
    text_ += detok_->push(t.token);
    pending_.push_back({t, start, text_.size()});
    ++n_tokens_;
    // A stop found at `at` ends the stream unless a longer one that starts earlier may still
    // complete (stops "o" and "cone" over "co", then "ne": "cone" wins at 0, not "o" at 1);
    // until the next tokens decide it, the text from that earlier start is held back.
    at = find_stop();
    if (at != std::string::npos && at <= partial_start()) return cut(at);
  }
  return release(std::min(partial_start(), at));
}

TextDelta StopMatcher::finish() {
  if (stopped_) return {};
  // The held-back bytes of an unfinished character become U+FFFD here, which a stop string may
  // contain ("\ufffd" as a stop was sent; fuzz_openai_request's stop check on a seed that ends
  // inside a character showed it).
  text_ += detok_->flush();
  if (!pending_.empty()) pending_.back().end = text_.size();
  if (size_t at = find_stop(); at != std::string::npos) return cut(at);
  return release(text_.size());
}

}  // namespace frugal::server
