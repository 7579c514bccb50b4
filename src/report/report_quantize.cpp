// The quantized rows of a report through the frugal_quantize library, with a checkpoint cache.
#include "report/report_quantize.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "quantize/quantize.h"

namespace frugal::report {
namespace {

namespace fs = std::filesystem;

constexpr const char* kStamp = "report-quantize.json";

struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void add(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) {
      h ^= b[i];
      h *= 1099511628211ull;
    }
  }
  void add(const std::string& s) {
    add(s.data(), s.size());
    add("\0", 1);  // separator: "ab"+"c" differs from "a"+"bc"
  }
  void add(int64_t v) { add(&v, sizeof v); }
};

Result<std::string> read_file(const std::string& path, const std::string& what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found(what + " " + path + ": cannot open");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

bool lm_head_storable(const std::string& p) {
  const auto o = quantize_options_for(p, 128);  // the group does not change the layout
  if (!o.is_ok()) return false;
  const auto layout = quantize::choose_layout(*o);
  return layout.is_ok() && quantize::layout_stores_lm_head(*layout);
}

Result<quantize::QuantizeOptions> quantize_options_for(const std::string& p, int64_t group_size, bool lm_head_int8) {
  quantize::QuantizeOptions o;
  if (p == "fp8") {
    o.format = quantize::Format::kFp8;
    o.fp8_scale = quantize::Fp8Scale::kBlock;
  } else if (p == "int8") {
    o.format = quantize::Format::kInt8;
  } else if (p == "int4-awq" || p == "int4-gptq" || p == "int4-rtn") {
    o.format = quantize::Format::kInt4;
    o.method = p == "int4-awq" ? quantize::Method::kAwq : p == "int4-gptq" ? quantize::Method::kGptq : quantize::Method::kRtn;
    o.group_size = group_size;
  } else if (p == "nf4") {
    o.format = quantize::Format::kNf4;
  } else {
    return invalid_argument("precision " + p + " is not made by frugal quantize (bf16 is the source checkpoint)");
  }
  if (lm_head_int8 && lm_head_storable(p)) {
    o.lm_head = true;
    if (o.format == quantize::Format::kInt4) o.lm_head_bits = 8;
  }
  FRUGAL_RETURN_IF_ERROR(quantize::choose_layout(o).status().with_context(p));
  return o;
}

std::string describe_quantization(const quantize::QuantizeOptions& o) {
  auto layout = quantize::choose_layout(o);
  std::string method = quantize::method_name(o.method);
  for (char& c : method) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string s = std::string(quantize::format_name(o.format)) + " " + method;
  if (!layout.is_ok()) return s;
  const int64_t g = quantize::effective_group_size(o, *layout);
  if (*layout == quantize::Layout::kFp8Block) {
    // the layout's name says the blocks
  } else if (*layout == quantize::Layout::kBnbNf4) {
    s += " blocks of " + std::to_string(g);
  } else if (*layout == quantize::Layout::kCtInt8 || *layout == quantize::Layout::kCtInt8W8A8 || g == -1) {
    s += " per channel";
  } else {
    s += " g" + std::to_string(g);
  }
  s += " (" + std::string(quantize::layout_name(*layout)) + ")";
  if (o.lm_head || o.lm_head_bits != 0) s += ", lm_head int" + std::to_string(o.lm_head_bits != 0 ? o.lm_head_bits : 8);
  return s;
}

Result<std::string> quantize_cache_key(const QuantizeRowOptions& o, const quantize::QuantizeOptions& q) {
  Fnv h;
  h.add(std::string("frugal report quantize v1"));
  h.add(static_cast<int64_t>(quantize::kQuantizerOutputVersion));
  FRUGAL_ASSIGN_OR_RETURN(std::string config, read_file(o.model_dir + "/config.json", "model config"));
  h.add(config);
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(o.model_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && (name.ends_with(".safetensors") || name.ends_with(".json"))) files.push_back(e.path());
  }
  if (ec) return io_error("model " + o.model_dir + ": " + ec.message());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    h.add(f.filename().string());
    h.add(static_cast<int64_t>(fs::file_size(f, ec)));
    h.add(static_cast<int64_t>(fs::last_write_time(f, ec).time_since_epoch().count()));
  }
  h.add(static_cast<int64_t>(q.format));
  h.add(static_cast<int64_t>(q.method));
  h.add(q.group_size);
  h.add(static_cast<int64_t>(q.sym) | static_cast<int64_t>(q.act_order) << 1 | static_cast<int64_t>(q.static_groups) << 2 |
        static_cast<int64_t>(q.awq_clip) << 3);
  h.add(static_cast<int64_t>(q.fp8_scale));
  h.add(static_cast<int64_t>(q.damp_percent * 1e9));
  h.add(q.gptq_block);
  h.add(static_cast<int64_t>(q.awq_grid));
  h.add(static_cast<int64_t>(q.smooth_alpha * 1e9));
  for (const std::string& k : q.keep) h.add(k);
  if (q.lm_head || q.lm_head_bits != 0) {  // keyed only when set: the caches of earlier versions stay valid
    h.add(std::string("lm_head"));
    h.add(static_cast<int64_t>(q.lm_head_bits));
  }
  if (quantize::needs_calibration(q.method)) {
    const std::string calib = o.calib_file.empty() ? o.default_calib_file : o.calib_file;
    FRUGAL_ASSIGN_OR_RETURN(std::string text, read_file(calib, "calibration text"));
    h.add(text);
    h.add(o.calib_tokens);
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h.h));
  return std::string(buf);
}

Result<QuantizedCheckpoint> quantize_or_reuse(const QuantizeRowOptions& o) {
  FRUGAL_ASSIGN_OR_RETURN(quantize::QuantizeOptions q, quantize_options_for(o.precision, o.group_size, o.lm_head_int8));
  FRUGAL_ASSIGN_OR_RETURN(std::string key, quantize_cache_key(o, q));
  QuantizedCheckpoint ck;
  ck.description = describe_quantization(q);
  ck.dir = o.cache_dir + "/" + o.precision + "-" + key;
  std::error_code ec;
  const std::string stamp = ck.dir + "/" + kStamp;
  if (fs::exists(stamp)) {
    auto text = read_file(stamp, "stamp");
    if (text.is_ok()) {
      const auto j = nlohmann::json::parse(*text, nullptr, false);
      if (!j.is_discarded() && j.value("key", std::string()) == key) {
        ck.reused = true;
        ck.calib_tokens = j.value("calib_tokens", int64_t{0});
        ck.seconds = j.value("seconds", 0.0);
        return ck;
      }
    }
  }
  // A directory without a valid stamp is a run killed between the quantizer's rename and the
  // stamp: its name is this cache's own (<precision>-<key>), so it is safe to redo.
  if (fs::exists(ck.dir)) fs::remove_all(ck.dir, ec);
  if (ec) return io_error("quantize cache " + ck.dir + ": cannot remove an incomplete checkpoint: " + ec.message());
  fs::create_directories(o.cache_dir, ec);
  if (ec) return io_error("quantize cache " + o.cache_dir + ": cannot create the directory: " + ec.message());
  quantize::QuantizeRequest r;
  r.model_dir = o.model_dir;
  r.out_dir = ck.dir;
  r.options = q;
  // RTN takes no calibration: passing no text keeps it from running the host forward.
  if (quantize::needs_calibration(q.method)) {
    r.calib_file = o.calib_file;
    r.default_calib_file = o.default_calib_file;
  }
  r.calib_tokens = o.calib_tokens;
  const auto t0 = std::chrono::steady_clock::now();
  auto rep = quantize::quantize_model(r);
  if (!rep.is_ok()) return rep.status().with_context("frugal quantize to " + ck.description);
  ck.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ck.calib_tokens = rep->calib_tokens;
  const nlohmann::json j{{"key", key},
                         {"precision", o.precision},
                         {"quantization", ck.description},
                         {"source", o.model_dir},
                         {"calib_file", quantize::needs_calibration(q.method)
                                            ? (o.calib_file.empty() ? o.default_calib_file : o.calib_file)
                                            : std::string()},
                         {"calib_tokens", ck.calib_tokens},
                         {"seconds", ck.seconds}};
  {
    std::ofstream f(stamp + ".tmp");
    f << j.dump(2) << "\n";
    if (!f) return io_error(stamp + ".tmp: cannot write");
  }
  fs::rename(stamp + ".tmp", stamp, ec);
  if (ec) return io_error(stamp + ": " + ec.message());
  return ck;
}

}  // namespace frugal::report
