// DeepSeek-R1 reasoning split: "<think>reasoning</think>answer" -> reasoning_content + content.
//
// Incremental over text deltas (a tag may arrive split across tokens: a suffix that could be the
// start of a tag is held back until the next delta decides it). Three shapes:
//  - "<think>...</think>answer": the model opens the tag itself (leading whitespace allowed);
//  - "...</think>answer": the chat template already opened <think> in the prompt, so the parser
//    starts inside the reasoning (start_in_reasoning);
//  - no tags: everything is content when the prompt did not open <think>. When it did and no
//    </think> ever comes, everything stays reasoning and content is empty: the model never
//    finished thinking (usually finish_reason "length"), and showing half a thought as the
//    answer would be wrong. This matches vLLM's deepseek_r1 parser.
#pragma once

#include <string>
#include <string_view>

namespace frugal::server {

struct ReasoningDelta {
  std::string reasoning;
  std::string content;
  bool empty() const { return reasoning.empty() && content.empty(); }
};

class ReasoningParser {
 public:
  explicit ReasoningParser(bool start_in_reasoning);
  ReasoningDelta push(std::string_view text);
  ReasoningDelta finish();  // releases held-back text at the end of the stream

 private:
  enum class State { kDetectOpen, kReasoning, kContent };
  void step(ReasoningDelta& out, bool at_end);

  State state_;
  std::string pending_;  // text not yet classified
};

// True when a rendered prompt ends inside an open <think> (ignoring trailing whitespace).
bool prompt_opens_think(std::string_view prompt);

}  // namespace frugal::server
