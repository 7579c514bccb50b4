// StopMatcher over the byte codec: stops found across token boundaries, never emitted, held-back
// text released when it turns out not to be a stop, and UTF-8 characters never split.
#include <gtest/gtest.h>

#include "byte_codec.h"
#include "server/stop_matcher.h"

namespace frugal::server {
namespace {
using testing::ByteCodec;

std::vector<runtime::GeneratedToken> toks(const std::string& text) {
  std::vector<runtime::GeneratedToken> out;
  std::vector<int32_t> ids = ByteCodec().encode(text, EncodeOptions{}).value();
  for (int32_t id : ids) out.push_back({.token = id});
  return out;
}

struct MatchRun {
  std::string text;
  std::vector<std::string> deltas;
  size_t n_released_tokens = 0;
  bool stopped = false;
};

// One token per push, as an engine step would deliver them.
MatchRun run(const std::string& generated, std::vector<std::string> stops) {
  ByteCodec codec;
  StopMatcher m(codec.stream_decoder(), std::move(stops));
  MatchRun r;
  for (const auto& t : toks(generated)) {
    TextDelta d = m.push({t});
    r.text += d.text;
    if (!d.text.empty()) r.deltas.push_back(d.text);
    r.n_released_tokens += d.tokens.size();
    if (d.stopped) {
      r.stopped = true;
      break;
    }
  }
  if (!r.stopped) {
    TextDelta d = m.finish();
    r.text += d.text;
    r.n_released_tokens += d.tokens.size();
    r.stopped = d.stopped;
  }
  return r;
}

TEST(StopMatcher, StopAcrossTokensIsNotEmitted) {
  MatchRun r = run("Hello world. The end", {"world"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "Hello ");
  EXPECT_EQ(r.n_released_tokens, 6u);  // "Hello " is six one-byte tokens
}

TEST(StopMatcher, HeldBackPrefixIsReleasedWhenNotAStop) {
  MatchRun r = run("a wor wo worm", {"world"});
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.text, "a wor wo worm");
  for (const auto& d : r.deltas) EXPECT_EQ(d.find("world"), std::string::npos);
}

TEST(StopMatcher, EarliestOfSeveralStops) {
  MatchRun r = run("one two three", {"three", "two"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "one ");
}

// A short stop completes while a longer one that starts earlier is still a prefix: the stream
// ends where the earliest stop starts, so the short one must wait for the long one to decide
// (fuzz_openai_request found "hellconto" with stops "o", "hellconto": "hellc" was sent).
TEST(StopMatcher, EarlierStartingLongerStopWinsOverAShortOneFoundFirst) {
  MatchRun r = run("hellconto and more", {"o", "hellconto", "stollo"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
  r = run("xhellcontx and more", {"o", "hellconto"});  // the long one fails: the short one stands
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "xhellc");
  r = run("xhellcon", {"o", "hellconto"});  // the stream ends while the long one is undecided
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "xhellc");
  ByteCodec codec;  // every token at once: the same end
  StopMatcher m(codec.stream_decoder(), {"o", "hellconto"});
  TextDelta d = m.push(toks("ahellconto!"));
  EXPECT_TRUE(d.stopped);
  EXPECT_EQ(d.text, "a");
}

TEST(StopMatcher, StopAtTheStartGivesEmptyText) {
  MatchRun r = run("STOP here", {"STOP"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
  EXPECT_EQ(r.n_released_tokens, 0u);
}

TEST(StopMatcher, MultiByteCharactersAreNeverSplit) {
  MatchRun r = run("héllo 日本 🙂", {});
  EXPECT_EQ(r.text, "héllo 日本 🙂");
  for (const auto& d : r.deltas) {
    // every delta is valid UTF-8 on its own: no delta starts with a continuation byte
    EXPECT_NE(static_cast<unsigned char>(d[0]) & 0xC0, 0x80) << d;
  }
  EXPECT_EQ(r.n_released_tokens, std::string("héllo 日本 🙂").size());
}

TEST(StopMatcher, MultiByteStop) {
  MatchRun r = run("abc日本def", {"本d"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "abc日");
}

// The stream ends inside a character: its bytes become U+FFFD only when flushed, and a stop
// string that the U+FFFD completes still stops it (fuzz_openai_request's stop check showed the
// bug on a seed written to end a stream inside a character).
TEST(StopMatcher, StopCompletedByTheFlushedReplacementCharacter) {
  MatchRun r = run("ab\xE6\x97", {"\xEF\xBF\xBD"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "ab");
  // The character's two tokens went out with "ab" (text still empty) before the flush showed them.
  EXPECT_EQ(r.n_released_tokens, 4u);
  r = run("ab\xE6\x97", {"b\xEF\xBF\xBD"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "a");
  r = run("ab\xE6\x97", {"c"});  // no stop: the replacement character is sent
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.text, "ab\xEF\xBF\xBD");
}

TEST(StopMatcher, NoStopsPassesEverythingThrough) {
  MatchRun r = run("plain text", {});
  EXPECT_EQ(r.text, "plain text");
  EXPECT_EQ(r.deltas.size(), 10u);
}

}  // namespace
}  // namespace frugal::server
