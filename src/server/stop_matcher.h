// Turns one choice's generated tokens into text deltas that are safe to send: complete UTF-8
// only (StreamDetokenizer), and never any part of a stop string. Stop strings are matched on the
// detokenized text, so they are found across token boundaries; a suffix that could be the start
// of a stop string is held back until the next tokens decide it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "server/text_codec.h"

namespace frugal::server {

// A generated token and the part of the text it produced (for logprobs).
struct EmittedToken {
  runtime::GeneratedToken token;
  size_t text_offset = 0;  // where its text starts in the choice's text
};

struct TextDelta {
  std::string text;                  // new text to send
  std::vector<EmittedToken> tokens;  // tokens whose text is now fully sent
  bool stopped = false;              // a stop string matched: the choice is over
};

class StopMatcher {
 public:
  StopMatcher(std::unique_ptr<StreamDetokenizer> detok, std::vector<std::string> stops);

  // Adds tokens; returns what may be sent now. After `stopped`, further pushes return nothing.
  TextDelta push(const std::vector<runtime::GeneratedToken>& tokens);
  // The engine finished (eos/length): releases the held-back text, up to a stop string if the
  // end of the stream completes one (then `stopped`).
  TextDelta finish();
  bool stopped() const { return stopped_; }
  int32_t n_tokens() const { return n_tokens_; }  // generated tokens consumed (until a stop)

 private:
  TextDelta release(size_t upto);
  // Where the earliest stop string starts in the unreleased text, or npos.
  size_t find_stop() const;
  // Where the earliest unreleased suffix that is a proper prefix of a stop string starts (a stop
  // that may still complete), or text_.size().
  size_t partial_start() const;
  // Ends the stream at `at`, where a stop string starts: releases the text before it.
  TextDelta cut(size_t at);

  std::unique_ptr<StreamDetokenizer> detok_;
  std::vector<std::string> stops_;
  std::string text_;        // all text decoded so far
  size_t sent_ = 0;         // text_[0, sent_) has been released
  struct Pending {
    runtime::GeneratedToken token;
    size_t start = 0;
    size_t end = 0;
  };
  std::vector<Pending> pending_;  // tokens not yet released
  bool stopped_ = false;
  int32_t n_tokens_ = 0;
};

}  // namespace frugal::server
