// The OpenAI side of `frugal bench serve`: prompts (random token-length controlled, or a JSONL of
// prompts / chats), request bodies for /v1/completions and /v1/chat/completions, and reading a
// streamed response into one request record (timings, token counts, error kind).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/serve_http.h"
#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace frugal::bench {

enum class Endpoint { kCompletions, kChat };
Result<Endpoint> parse_endpoint(const std::string& s);  // "/v1/completions" | "/v1/chat/completions"
const char* endpoint_path(Endpoint e);

// One prompt of the dataset. Exactly one of text / token_ids / messages is used.
struct BenchPrompt {
  std::string text;
  std::vector<int32_t> token_ids;  // random dataset without a tokenizer (completions only)
  nlohmann::json messages;         // chat datasets
  int64_t prompt_tokens = -1;      // -1: unknown until the server's usage says
  int32_t output_len = 128;
  std::string id;
};

struct RandomDatasetOptions {
  int32_t num_prompts = 100;
  int32_t input_len = 128;
  int32_t output_len = 128;
  double range_ratio = 0;       // lengths uniform in [len * (1 - r), len * (1 + r)]
  int32_t fallback_vocab = 256; // no tokenizer: ids drawn from [kFirstId, fallback_vocab)
  uint64_t seed = 0;
};
// With a tokenizer: ids uniform over the vocabulary minus special / added tokens, decoded to
// text (vLLM's random dataset); prompt_tokens is the re-encoded length. Without one: token-id
// prompts (only /v1/completions accepts them).
Result<std::vector<BenchPrompt>> random_dataset(const RandomDatasetOptions& o, const Tokenizer* tok, Endpoint ep);

// JSONL: one object per line; the prompt is `field` when given, else the first of "prompt",
// "question", "text", "input", or "messages" (a chat). Blank lines are skipped; errors name the
// file and line.
Result<std::vector<BenchPrompt>> jsonl_dataset(const std::string& path, const std::string& field, int32_t output_len,
                                               int32_t limit, const Tokenizer* tok, Endpoint ep);

struct RequestOptions {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;
  double temperature = 0;
  int32_t n = 1;
  bool ignore_eos = true;
  bool include_usage = true;
  nlohmann::json extra_body = nlohmann::json::object();  // merged last
};
nlohmann::json request_body(const BenchPrompt& p, const RequestOptions& o);

// Everything measured about one request. Times in ms; *_s relative to the benchmark's start.
struct RequestRecord {
  int64_t index = 0;
  double start_s = 0, end_s = 0;
  bool ok = false;
  std::string error_kind;  // connect, timeout, read, http_<status>, stream_error, incomplete_stream, invalid_json, no_output
  std::string error_message;
  double ttft_ms = 0, e2e_ms = 0, tpot_ms = 0;
  std::vector<double> itl_ms;
  int64_t prompt_tokens = 0, output_tokens = 0;
  std::string token_count_source;  // usage | tokenizer | chunks
  int32_t n_choices = 0;
  int64_t n_chunks = 0, n_comments = 0;
  std::vector<std::string> texts;  // per choice
  std::string server_header;
};

// Reads an OpenAI stream: SSE events -> per-choice text and chunk times, usage, errors.
class StreamReader {
 public:
  explicit StreamReader(Endpoint ep) : endpoint_(ep) {}
  void on_bytes(std::string_view bytes, Clock::time_point at);
  void on_end();  // the body ended
  // Fills timings, token counts (usage, else content chunks) and the error of `r` (sent = when
  // the request started).
  void finish(Clock::time_point sent, Clock::time_point end, const HttpStreamResult& http, RequestRecord& r);

 private:
  struct Choice {
    std::string text;
    std::vector<Clock::time_point> chunk_times;
  };
  void on_event(const std::string& data, Clock::time_point at);
  Endpoint endpoint_;
  SseParser sse_;
  std::map<int64_t, Choice> choices_;
  bool done_ = false;
  std::optional<int64_t> usage_prompt_, usage_completion_;
  std::string error_kind_, error_message_;
  int64_t n_chunks_ = 0;
};

// Without usage from the server: output tokens = the tokenizer's count of each choice's text
// (run after the load, so tokenizing never delays the streams being timed). Recomputes TPOT.
void count_tokens_with_tokenizer(RequestRecord& r, const Tokenizer& tok);
// TPOT of a finished record from e2e, TTFT, output tokens and choices.
void compute_tpot(RequestRecord& r);

}  // namespace frugal::bench
