#include "model/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

namespace frugal::model {
namespace {

// A header larger than this is not a real checkpoint (DeepSeek-V3 shards stay below 2 MB).
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;

std::string quote(const std::string& s) { return "'" + s + "'"; }

// Parses one header entry into `t` (data pointer not yet set). Errors name file and tensor.
Status parse_entry(const std::string& path, const std::string& name, const nlohmann::json& v,
                   uint64_t data_size, TensorEntry* t, uint64_t* begin) {
  const std::string where = path + ": tensor " + quote(name);
  if (!v.is_object()) return corrupt(where + ": header entry is not an object");
  auto dt = v.find("dtype");
  auto sh = v.find("shape");
  auto off = v.find("data_offsets");
  if (dt == v.end() || !dt->is_string()) return corrupt(where + ": missing or non-string field 'dtype'");
  if (sh == v.end() || !sh->is_array()) return corrupt(where + ": missing or non-array field 'shape'");
  if (off == v.end() || !off->is_array() || off->size() != 2)
    return corrupt(where + ": field 'data_offsets' must be an array of two integers");
  const std::string dtype_str = dt->get<std::string>();
  if (!dtype_from_safetensors(dtype_str, &t->dtype))
    return unsupported(where + ": unsupported dtype " + quote(dtype_str));
  if (sh->size() > static_cast<size_t>(kMaxDims))
    return unsupported(where + ": " + std::to_string(sh->size()) + " dimensions (at most " +
                       std::to_string(kMaxDims) + " supported)");
  std::vector<int64_t> dims;
  for (const auto& d : *sh) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      return corrupt(where + ": field 'shape' must hold non-negative integers");
    dims.push_back(d.get<int64_t>());
  }
  t->shape = Shape::of(dims);
  for (const auto& o : *off)
    if (!o.is_number_unsigned() && !(o.is_number_integer() && o.get<int64_t>() >= 0))
      return corrupt(where + ": field 'data_offsets' must hold non-negative integers");
  const uint64_t b = (*off)[0].get<uint64_t>(), e = (*off)[1].get<uint64_t>();
  if (b > e) return corrupt(where + ": data_offsets begin " + std::to_string(b) + " > end " + std::to_string(e));
  if (e > data_size)
    return corrupt(where + ": data_offsets end " + std::to_string(e) + " is past the end of the data (" +
                   std::to_string(data_size) + " bytes)");
  // Guard numel against overflow before computing the byte size.
  long double numel = 1;
  for (int64_t d : dims) numel *= static_cast<long double>(d);
  const int64_t expect = numel > static_cast<long double>(data_size) * 8 ? -1 : dtype_bytes(t->dtype, t->shape.numel());
  if (expect != static_cast<int64_t>(e - b))
    return corrupt(where + ": data_offsets span " + std::to_string(e - b) + " bytes but shape " +
                   t->shape.to_string() + " x " + dtype_str + " needs " +
                   (expect < 0 ? std::string("more than the file holds") : std::to_string(expect)));
  t->name = name;
  t->file = path;
  t->nbytes = static_cast<int64_t>(e - b);
  *begin = b;
  return {};
}

}  // namespace

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  auto f = std::unique_ptr<SafetensorsFile>(new SafetensorsFile());
  FRUGAL_ASSIGN_OR_RETURN(f->file_, MappedFile::open(path));
  FRUGAL_RETURN_IF_ERROR(f->parse());
  return f;
}

Status SafetensorsFile::parse() {
  const std::string& path = file_.path();
  const uint64_t size = file_.size();
  if (size < 8) return corrupt(path + ": file of " + std::to_string(size) + " bytes is too short for a safetensors header");
  uint64_t n = 0;
  std::memcpy(&n, file_.data(), 8);  // little-endian u64 (x86/ARM hosts are little-endian)
  if (n > kMaxHeaderBytes) return corrupt(path + ": header length " + std::to_string(n) + " is absurd (limit " + std::to_string(kMaxHeaderBytes) + ")");
  if (n + 8 > size)
    return corrupt(path + ": header length " + std::to_string(n) + " runs past the end of the file (" +
                   std::to_string(size) + " bytes)");
  const char* hdr = reinterpret_cast<const char*>(file_.data() + 8);
  nlohmann::json j = nlohmann::json::parse(hdr, hdr + n, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return corrupt(path + ": header is not valid JSON");
  if (!j.is_object()) return corrupt(path + ": header is not a JSON object");
  const uint8_t* data = file_.data() + 8 + n;
  const uint64_t data_size = size - 8 - n;
  std::vector<std::pair<uint64_t, size_t>> spans;  // (begin, index) for the overlap check
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return corrupt(path + ": '__metadata__' is not an object");
      for (auto m = it->begin(); m != it->end(); ++m)
        if (m->is_string()) metadata_[m.key()] = m->get<std::string>();
      continue;
    }
    TensorEntry t;
    uint64_t begin = 0;
    FRUGAL_RETURN_IF_ERROR(parse_entry(path, it.key(), *it, data_size, &t, &begin));
    t.data = data + begin;
    spans.emplace_back(begin, tensors_.size());
    by_name_[t.name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    const TensorEntry& prev = tensors_[spans[i - 1].second];
    const TensorEntry& cur = tensors_[spans[i].second];
    if (spans[i - 1].first + static_cast<uint64_t>(prev.nbytes) > spans[i].first)
      return corrupt(path + ": tensor " + quote(cur.name) + " overlaps tensor " + quote(prev.name));
  }
  return {};
}

const TensorEntry* SafetensorsFile::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

Result<std::unique_ptr<SafetensorsSet>> SafetensorsSet::open_file(const std::string& path) {
  auto set = std::unique_ptr<SafetensorsSet>(new SafetensorsSet());
  FRUGAL_ASSIGN_OR_RETURN(auto f, SafetensorsFile::open(path));
  FRUGAL_RETURN_IF_ERROR(set->add_file(std::move(f)));
  return set;
}

Result<std::unique_ptr<SafetensorsSet>> SafetensorsSet::open_dir(const std::string& dir) {
  auto set = std::unique_ptr<SafetensorsSet>(new SafetensorsSet());
  const std::string index = dir + "/model.safetensors.index.json";
  const std::string single = dir + "/model.safetensors";
  if (file_exists(index)) {
    FRUGAL_RETURN_IF_ERROR(set->load_index(dir, index));
  } else if (file_exists(single)) {
    FRUGAL_ASSIGN_OR_RETURN(auto f, SafetensorsFile::open(single));
    FRUGAL_RETURN_IF_ERROR(set->add_file(std::move(f)));
  } else {
    return not_found(dir + ": no model.safetensors or model.safetensors.index.json");
  }
  return set;
}

Status SafetensorsSet::add_file(std::unique_ptr<SafetensorsFile> f) {
  for (const auto& t : f->tensors()) {
    auto [it, inserted] = by_name_.emplace(t.name, &t);
    if (!inserted)
      return corrupt(f->path() + ": tensor " + quote(t.name) + " also appears in " + it->second->file);
  }
  files_.push_back(std::move(f));
  return {};
}

Status SafetensorsSet::load_index(const std::string& dir, const std::string& index_path) {
  FRUGAL_ASSIGN_OR_RETURN(std::string text, read_file(index_path));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return corrupt(index_path + ": not a valid JSON object");
  auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object()) return corrupt(index_path + ": missing object field 'weight_map'");
  std::map<std::string, std::vector<std::string>> by_shard;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it->is_string()) return corrupt(index_path + ": weight_map[" + quote(it.key()) + "] is not a file name");
    const std::string shard = it->get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos || shard.find("..") != std::string::npos)
      return corrupt(index_path + ": weight_map[" + quote(it.key()) + "] names an invalid file " + quote(shard));
    by_shard[shard].push_back(it.key());
  }
  for (const auto& [shard, names] : by_shard) {
    const std::string path = dir + "/" + shard;
    if (!file_exists(path))
      return not_found(index_path + ": shard " + quote(shard) + " (holding tensor " + quote(names.front()) + ") does not exist");
    FRUGAL_ASSIGN_OR_RETURN(auto f, SafetensorsFile::open(path));
    for (const auto& name : names)
      if (!f->find(name))
        return corrupt(index_path + ": tensor " + quote(name) + " is mapped to " + quote(shard) + " but not found there");
    FRUGAL_RETURN_IF_ERROR(add_file(std::move(f)));
  }
  return {};
}

const TensorEntry* SafetensorsSet::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<std::string> SafetensorsSet::names() const {
  std::vector<std::string> out;
  out.reserve(by_name_.size());
  for (const auto& [name, _] : by_name_) out.push_back(name);
  return out;
}

void SafetensorsSet::prefetch() const {
  for (const auto& f : files_) f->prefetch();
}

Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors) {
  nlohmann::json hdr = nlohmann::json::object();
  uint64_t off = 0;
  for (const auto& t : tensors) {
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    const uint64_t nb = static_cast<uint64_t>(dtype_bytes(t.dtype, numel));
    hdr[t.name] = {{"dtype", dtype_safetensors_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {off, off + nb}}};
    off += nb;
  }
  std::string h = hdr.dump();
  while ((h.size() + 8) % 8 != 0) h += ' ';  // pad so the data region is 8-byte aligned
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return io_error(path + ": cannot open for writing");
  const uint64_t n = h.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const auto& t : tensors) {
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    out.write(static_cast<const char*>(t.data), dtype_bytes(t.dtype, numel));
  }
  if (!out) return io_error(path + ": write failed");
  return {};
}

}  // namespace frugal::model
