// The --save-logits file of `frugal eval ppl`, read back by `frugal eval kld`. Little-endian:
//
//   offset size  field
//   0      8     magic "FRGLOGP1"
//   8      4     u32 version (1)
//   12     4     u32 header_bytes (80)
//   16     8     u64 model_hash (FNV-1a 64 of config.json and the weight files' names and sizes)
//   24     4     i32 vocab
//   28     4     i32 ctx
//   32     4     i32 stride
//   36     4     i32 top_k
//   40     4     i32 first: the first scored logits row of a chunk
//   44     4     i32 bos: id written over every chunk's first token, -1 for none
//   48     8     i64 n_chunks
//   56     8     i64 n_tokens: token ids that follow the header
//   64     8     i64 n_scored: records that follow the ids
//   72     8     u64 tokens_hash (FNV-1a 64 of the ids' bytes)
//   80     4*n_tokens            i32 token ids (the tokenized text)
//   then n_scored records of 12 + 8*top_k bytes, chunk by chunk, position by position:
//          i32 next token, f32 its log-prob, i32 ids[top_k], f32 logprobs[top_k] (decreasing),
//          f32 log of the probability mass outside the top-k (-inf when none is left)
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "eval/kld.h"

namespace frugal::eval {

struct LogitsHeader {
  uint64_t model_hash = 0;
  int32_t vocab = 0;
  int32_t ctx = 0;
  int32_t stride = 0;
  int32_t top_k = 0;
  int32_t first = 0;
  int32_t bos = -1;
  int64_t n_chunks = 0;
  int64_t n_tokens = 0;
  int64_t n_scored = 0;
  uint64_t tokens_hash = 0;
};

constexpr uint32_t kLogitsVersion = 1;
constexpr uint32_t kLogitsHeaderBytes = 80;

uint64_t fnv1a64(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull);

// Writes the header and ids at open, then one record per add(); close() checks the count.
class LogitsWriter {
 public:
  static Result<std::unique_ptr<LogitsWriter>> open(const std::string& path, const LogitsHeader& h,
                                                    const std::vector<int32_t>& tokens);
  ~LogitsWriter();
  Status add(const TopK& t);
  Status close();

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
  LogitsHeader h_;
  int64_t written_ = 0;
};

struct LogitsFile {
  LogitsHeader header;
  std::vector<int32_t> tokens;
  std::vector<TopK> records;
};

// Reads and checks the whole file (magic, version, sizes, ids inside the vocabulary).
Result<LogitsFile> read_logits_file(const std::string& path);

}  // namespace frugal::eval
