#include "eval/logits_file.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

namespace frugal::eval {

uint64_t fnv1a64(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

namespace {

constexpr char kMagic[8] = {'F', 'R', 'G', 'L', 'O', 'G', 'P', '1'};

template <typename T>
void put(std::vector<unsigned char>& b, T v) {
  unsigned char raw[sizeof(T)];
  std::memcpy(raw, &v, sizeof(T));
  b.insert(b.end(), raw, raw + sizeof(T));
}

template <typename T>
T get(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

Result<std::unique_ptr<LogitsWriter>> LogitsWriter::open(const std::string& path, const LogitsHeader& h,
                                                         const std::vector<int32_t>& tokens) {
  auto w = std::unique_ptr<LogitsWriter>(new LogitsWriter());
  w->path_ = path;
  w->h_ = h;
  w->f_ = std::fopen(path.c_str(), "wb");
  if (!w->f_) return io_error(path + ": cannot create the file");
  std::vector<unsigned char> b(kMagic, kMagic + 8);
  put<uint32_t>(b, kLogitsVersion);
  put<uint32_t>(b, kLogitsHeaderBytes);
  put<uint64_t>(b, h.model_hash);
  put<int32_t>(b, h.vocab);
  put<int32_t>(b, h.ctx);
  put<int32_t>(b, h.stride);
  put<int32_t>(b, h.top_k);
  put<int32_t>(b, h.first);
  put<int32_t>(b, h.bos);
  put<int64_t>(b, h.n_chunks);
  put<int64_t>(b, static_cast<int64_t>(tokens.size()));
  put<int64_t>(b, h.n_scored);
  put<uint64_t>(b, fnv1a64(tokens.data(), tokens.size() * sizeof(int32_t)));
  for (int32_t t : tokens) put<int32_t>(b, t);
  if (std::fwrite(b.data(), 1, b.size(), w->f_) != b.size()) return io_error(path + ": write failed");
  return w;
}

LogitsWriter::~LogitsWriter() {
  if (f_) std::fclose(f_);
}

Status LogitsWriter::add(const TopK& t) {
  if (static_cast<int32_t>(t.ids.size()) != h_.top_k || t.logprobs.size() != t.ids.size())
    return internal_error(path_ + ": record with " + std::to_string(t.ids.size()) + " ids, expected top_k " +
                          std::to_string(h_.top_k));
  std::vector<unsigned char> b;
  b.reserve(12 + 8 * t.ids.size());
  put<int32_t>(b, t.next);
  put<float>(b, t.next_logprob);
  for (int32_t id : t.ids) put<int32_t>(b, id);
  for (float lp : t.logprobs) put<float>(b, lp);
  put<float>(b, t.log_rest);
  if (std::fwrite(b.data(), 1, b.size(), f_) != b.size()) return io_error(path_ + ": write failed");
  ++written_;
  return Status::ok();
}

Status LogitsWriter::close() {
  if (!f_) return Status::ok();
  const int rc = std::fclose(f_);
  f_ = nullptr;
  if (rc != 0) return io_error(path_ + ": close failed");
  if (written_ != h_.n_scored)
    return internal_error(path_ + ": wrote " + std::to_string(written_) + " records, the header says " +
                          std::to_string(h_.n_scored));
  return Status::ok();
}

Result<LogitsFile> read_logits_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found(path + ": cannot open the reference file");
  std::ostringstream ss;
  ss << f.rdbuf();
  const std::string data = std::move(ss).str();
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  if (data.size() < kLogitsHeaderBytes || std::memcmp(p, kMagic, 8) != 0)
    return corrupt(path + ": not a frugal logits file (magic 'FRGLOGP1' missing; write it with frugal eval ppl --save-logits)");
  const uint32_t version = get<uint32_t>(p + 8);
  if (version != kLogitsVersion)
    return corrupt(path + ": version " + std::to_string(version) + ", this frugal reads version " + std::to_string(kLogitsVersion));
  if (get<uint32_t>(p + 12) != kLogitsHeaderBytes)
    return corrupt(path + ": header_bytes " + std::to_string(get<uint32_t>(p + 12)) + ", expected " +
                   std::to_string(kLogitsHeaderBytes));
  LogitsFile out;
  LogitsHeader& h = out.header;
  h.model_hash = get<uint64_t>(p + 16);
  h.vocab = get<int32_t>(p + 24);
  h.ctx = get<int32_t>(p + 28);
  h.stride = get<int32_t>(p + 32);
  h.top_k = get<int32_t>(p + 36);
  h.first = get<int32_t>(p + 40);
  h.bos = get<int32_t>(p + 44);
  h.n_chunks = get<int64_t>(p + 48);
  h.n_tokens = get<int64_t>(p + 56);
  h.n_scored = get<int64_t>(p + 64);
  h.tokens_hash = get<uint64_t>(p + 72);
  if (h.vocab <= 0 || h.ctx < 4 || h.top_k <= 0 || h.top_k > h.vocab || h.n_tokens < 0 || h.n_scored < 0 ||
      h.first < 0 || h.first >= h.ctx)
    return corrupt(path + ": header has out-of-range fields (vocab " + std::to_string(h.vocab) + ", ctx " +
                   std::to_string(h.ctx) + ", top_k " + std::to_string(h.top_k) + ", first " + std::to_string(h.first) + ")");
  const uint64_t rec = 12 + 8ull * static_cast<uint64_t>(h.top_k);
  const uint64_t want = kLogitsHeaderBytes + 4ull * static_cast<uint64_t>(h.n_tokens) + rec * static_cast<uint64_t>(h.n_scored);
  if (data.size() != want)
    return corrupt(path + ": " + std::to_string(data.size()) + " bytes, the header describes " + std::to_string(want) +
                   " (truncated or not written to the end)");
  const unsigned char* q = p + kLogitsHeaderBytes;
  out.tokens.resize(static_cast<size_t>(h.n_tokens));
  if (h.n_tokens > 0) std::memcpy(out.tokens.data(), q, 4 * static_cast<size_t>(h.n_tokens));
  if (fnv1a64(out.tokens.data(), out.tokens.size() * 4) != h.tokens_hash)
    return corrupt(path + ": token ids do not match the header's tokens_hash");
  for (size_t i = 0; i < out.tokens.size(); ++i)
    if (out.tokens[i] < 0 || out.tokens[i] >= h.vocab)
      return corrupt(path + ": token " + std::to_string(i) + " has id " + std::to_string(out.tokens[i]) +
                     " outside the vocabulary of " + std::to_string(h.vocab));
  q += 4 * static_cast<size_t>(h.n_tokens);
  out.records.resize(static_cast<size_t>(h.n_scored));
  const auto k = static_cast<size_t>(h.top_k);
  for (int64_t r = 0; r < h.n_scored; ++r, q += rec) {
    TopK& t = out.records[static_cast<size_t>(r)];
    t.next = get<int32_t>(q);
    t.next_logprob = get<float>(q + 4);
    t.ids.resize(k);
    t.logprobs.resize(k);
    std::memcpy(t.ids.data(), q + 8, 4 * k);
    std::memcpy(t.logprobs.data(), q + 8 + 4 * k, 4 * k);
    t.log_rest = get<float>(q + 8 + 8 * k);
    bool ok = t.next >= 0 && t.next < h.vocab;
    for (int32_t id : t.ids) ok = ok && id >= 0 && id < h.vocab;
    if (!ok) return corrupt(path + ": record " + std::to_string(r) + " has a token id outside the vocabulary");
  }
  return out;
}

}  // namespace frugal::eval
