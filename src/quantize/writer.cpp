#include "quantize/writer.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "model/safetensors.h"

namespace frugal::quantize {

namespace {
std::string tmp_shard(const std::string& dir, size_t i) { return dir + "/shard-" + std::to_string(i) + ".partial"; }
std::string shard_name(size_t i, size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}
}  // namespace

Status ShardedWriter::add(OutTensor t) {
  const int64_t nb = static_cast<int64_t>(t.data.size());
  if (!pending_.empty() && pending_bytes_ + nb > max_shard_bytes_) FRUGAL_RETURN_IF_ERROR(flush());
  pending_bytes_ += nb;
  total_bytes_ += nb;
  pending_.push_back(std::move(t));
  return {};
}

Status ShardedWriter::flush() {
  if (pending_.empty()) return {};
  std::vector<model::TensorToWrite> tw;
  std::vector<std::string> names;
  for (const auto& t : pending_) {
    tw.push_back({t.name, t.dtype, t.shape, t.data.data()});
    names.push_back(t.name);
  }
  FRUGAL_RETURN_IF_ERROR(model::write_safetensors(tmp_shard(dir_, shard_names_.size()), tw));
  shard_names_.push_back(std::move(names));
  pending_.clear();
  pending_bytes_ = 0;
  return {};
}

Status ShardedWriter::finish() {
  FRUGAL_RETURN_IF_ERROR(flush());
  std::set<std::string> seen;
  for (const auto& s : shard_names_)
    for (const auto& n : s)
      if (!seen.insert(n).second) return internal_error("tensor " + n + " written twice");
  const size_t n = shard_names_.size();
  std::error_code ec;
  if (n == 1) {
    std::filesystem::rename(tmp_shard(dir_, 0), dir_ + "/model.safetensors", ec);
    if (ec) return io_error(dir_ + "/model.safetensors: " + ec.message());
    return {};
  }
  nlohmann::json map = nlohmann::json::object();
  for (size_t i = 0; i < n; ++i) {
    std::filesystem::rename(tmp_shard(dir_, i), dir_ + "/" + shard_name(i, n), ec);
    if (ec) return io_error(dir_ + "/" + shard_name(i, n) + ": " + ec.message());
    for (const auto& name : shard_names_[i]) map[name] = shard_name(i, n);
  }
  nlohmann::json idx = {{"metadata", {{"total_size", total_bytes_}}}, {"weight_map", map}};
  std::ofstream f(dir_ + "/model.safetensors.index.json");
  f << idx.dump(2) << "\n";
  if (!f) return io_error(dir_ + "/model.safetensors.index.json: write failed");
  return {};
}

}  // namespace frugal::quantize
