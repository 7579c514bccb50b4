#include "quantize/quantize.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "core/mapped_file.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "quantize/host_layer.h"
#include "quantize/methods.h"
#include "quantize/packing.h"
#include "quantize/rtn.h"
#include "quantize/writer.h"
#include "tokenizer/tokenizer.h"

namespace frugal::quantize {

namespace fs = std::filesystem;

namespace {

// Progress per layer with ETA on stderr: a bar when it is a terminal, else a line per layer
// (for logs of long runs).
class Progress {
 public:
  Progress(bool on, int64_t total) : on_(on), tty_(isatty(2)), total_(total), t0_(std::chrono::steady_clock::now()) {}
  void update(int64_t done, const std::string& what) {
    if (!on_) return;
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    const double eta = done > 0 ? el / static_cast<double>(done) * static_cast<double>(total_ - done) : 0;
    if (!tty_) {
      if (done > 0) {
        std::fprintf(stderr, "quantize: %lld/%lld layers (%s) %.1fs, ETA %.0fs\n", static_cast<long long>(done),
                     static_cast<long long>(total_), what.c_str(), el, eta);
      }
      return;
    }
    const int width = 30, fill = static_cast<int>(width * done / std::max<int64_t>(total_, 1));
    std::fprintf(stderr, "\r[%s%s] %3lld/%lld layers  %5.0fs  ETA %5.0fs  %-40s", std::string(fill, '#').c_str(),
                 std::string(width - fill, '.').c_str(), static_cast<long long>(done), static_cast<long long>(total_), el,
                 eta, what.c_str());
    if (done == total_) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  bool on_;
  bool tty_;
  int64_t total_;
  std::chrono::steady_clock::time_point t0_;
};

// Removes the temporary output directory unless released.
struct TmpDir {
  std::string path;
  bool keep = false;
  ~TmpDir() {
    if (!keep && !path.empty()) {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  }
};

// Seconds per phase of the current layer, printed on its progress line: where a long run's
// time goes (docs/perf/2026-12-02-quantize-7b.md).
struct Phases {
  enum Id { kRead, kForward, kFactor, kMethod, kPack, kError, kWrite, kCount };
  double s[kCount] = {};
  std::string line() const {
    static constexpr const char* kNames[kCount] = {"read", "forward", "factor", "method", "pack", "error", "write"};
    std::string r;
    char buf[48];
    for (int i = 0; i < kCount; ++i) {
      if (s[i] < 0.05) continue;
      std::snprintf(buf, sizeof(buf), "%s%s %.1fs", r.empty() ? "" : ", ", kNames[i], s[i]);
      r += buf;
    }
    return r;
  }
};

// Adds the seconds of its scope to one phase.
class PhaseTimer {
 public:
  PhaseTimer(Phases& p, Phases::Id id) : acc_(p.s[id]), t0_(std::chrono::steady_clock::now()) {}
  ~PhaseTimer() { acc_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  double& acc_;
  std::chrono::steady_clock::time_point t0_;
};

bool ends_with(const std::string& s, const std::string& suf) { return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0; }

bool is_kept(const std::string& prefix, const std::vector<std::string>& keep) {
  for (const auto& k : keep)
    if (prefix == k || ends_with(prefix, "." + k)) return true;
  return false;
}

// A 2-D weight of a decoder layer that the format quantizes: not embeddings, lm_head, norms, or
// the MoE router (mlp.gate), which stay in precision whatever the flags say.
bool is_candidate(const model::TensorEntry& e) {
  const std::string& n = e.name;
  if (!ends_with(n, ".weight") || e.shape.ndim != 2) return false;
  if (n.rfind("model.layers.", 0) != 0) return false;
  if (n.find("norm") != std::string::npos || n.find("embed") != std::string::npos) return false;
  if (ends_with(n, ".mlp.gate.weight")) return false;  // MoE router
  return true;
}

std::string prefix_of(const std::string& weight_name) { return weight_name.substr(0, weight_name.size() - 7); }

int64_t layer_of(const std::string& name) {
  if (name.rfind("model.layers.", 0) != 0) return -1;
  return std::strtoll(name.c_str() + 13, nullptr, 10);
}

IntSpec int_spec(const StoredLayout& l) {
  switch (l.layout) {
    case Layout::kAwqGemm: return {.scheme = IntScheme::kAwq, .bits = 4, .group = l.group};
    case Layout::kCtInt8:
    case Layout::kCtInt8W8A8: return {.scheme = IntScheme::kCtInt8, .bits = 8, .group = -1};
    default: return {.scheme = l.sym ? IntScheme::kGptqSym : IntScheme::kGptqAsym, .bits = l.bits, .group = l.group};
  }
}

OutTensor float_tensor(const std::string& name, DType dt, std::vector<int64_t> shape, const std::vector<float>& v) {
  OutTensor t{name, dt, std::move(shape), {}};
  t.data.resize(static_cast<size_t>(dtype_bytes(dt, static_cast<int64_t>(v.size()))));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (dt) {
      case DType::kF16: reinterpret_cast<uint16_t*>(t.data.data())[i] = f32_to_f16(v[i]); break;
      case DType::kBF16: reinterpret_cast<uint16_t*>(t.data.data())[i] = f32_to_bf16(v[i]); break;
      default: reinterpret_cast<float*>(t.data.data())[i] = v[i]; break;
    }
  }
  return t;
}

// Copies a source tensor: tensors in the checkpoint's main dtype `src` convert to `dt`; others
// (an f32 router bias in a bf16 checkpoint, integer tensors) are copied as they are.
OutTensor copy_tensor(const model::TensorEntry& e, DType src, DType dt) {
  std::vector<int64_t> shape(e.shape.dims.begin(), e.shape.dims.begin() + e.shape.ndim);
  if (e.dtype != src || e.dtype == dt) {
    OutTensor t{e.name, e.dtype, shape, std::vector<uint8_t>(e.data, e.data + e.nbytes)};
    return t;
  }
  std::vector<float> v(static_cast<size_t>(e.shape.numel()));
  convert_to_f32(e.dtype, e.data, v.data(), e.shape.numel());
  return float_tensor(e.name, dt, shape, v);
}

struct Ctx {
  const QuantizeRequest& req;
  const QuantizeOptions& o;
  StoredLayout layout;
  DType keep_dtype;
  ShardedWriter& writer;
  QuantizeReport& report;
  std::vector<std::string>& kept;
  QuantMath& math;
  Phases& ph;
};

// Quantizes w [out, in] by RTN in the layout; returns tensors (relative names; none when !pack:
// the error table's RTN column needs only the dequantized weights) and dequantized weights.
Result<std::vector<OutTensor>> rtn_pack(const Ctx& c, const std::string& name, const std::vector<float>& w, int64_t out,
                                        int64_t in, std::vector<float>* deq, bool pack = true) {
  switch (c.layout.layout) {
    case Layout::kGptq:
    case Layout::kAwqGemm:
    case Layout::kCtInt8:
    case Layout::kCtInt8W8A8: {
      FRUGAL_ASSIGN_OR_RETURN(IntQuant q, rtn_int(name, w.data(), out, in, int_spec(c.layout)));
      *deq = q.dequantize();
      if (!pack) return std::vector<OutTensor>{};
      if (c.layout.layout == Layout::kGptq) return pack_gptq(name, q, c.layout.gptq_v2);
      if (c.layout.layout == Layout::kAwqGemm) return pack_awq(name, q);
      return pack_ct_int8(q);
    }
    case Layout::kCtFp8:
    case Layout::kFp8Block: {
      const Fp8Quant q = rtn_fp8(w.data(), out, in, c.layout.layout == Layout::kFp8Block ? Fp8Scale::kBlock : c.layout.fp8);
      *deq = q.dequantize();
      if (!pack) return std::vector<OutTensor>{};
      return pack_fp8(q);
    }
    case Layout::kBnbNf4: {
      FRUGAL_ASSIGN_OR_RETURN(Nf4Quant q, rtn_nf4(name, w.data(), out, in, c.layout.group));
      *deq = q.dequantize();
      if (!pack) return std::vector<OutTensor>{};
      return pack_nf4(q, c.keep_dtype == DType::kF16 ? "float16" : c.keep_dtype == DType::kF32 ? "float32" : "bfloat16");
    }
  }
  return internal_error("unknown layout");
}

double weight_error(const std::vector<float>& w, const std::vector<float>& d) {
  // Fixed blocks summed in order: the same result whatever the thread count.
  constexpr int64_t kBlock = 1 << 16;
  const int64_t n = static_cast<int64_t>(w.size()), nb = (n + kBlock - 1) / kBlock;
  std::vector<double> nums(static_cast<size_t>(nb)), dens(static_cast<size_t>(nb));
  ThreadPool::global().parallel_for(nb, 4, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      double num = 0, den = 0;
      for (int64_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) {
        num += (static_cast<double>(w[i]) - d[i]) * (static_cast<double>(w[i]) - d[i]);
        den += static_cast<double>(w[i]) * w[i];
      }
      nums[b] = num;
      dens[b] = den;
    }
  });
  double num = 0, den = 0;
  for (int64_t b = 0; b < nb; ++b) {
    num += nums[b];
    den += dens[b];
  }
  return den > 0 ? num / den : num;
}

Status emit_linear(const Ctx& c, const std::string& name, std::vector<OutTensor> ts, std::vector<float> deq,
                   const std::vector<float>* bias) {
  for (auto& t : ts) {
    t.name = name + "." + t.name;
    FRUGAL_RETURN_IF_ERROR(c.writer.add(std::move(t)));
  }
  if (bias && !bias->empty()) {
    FRUGAL_RETURN_IF_ERROR(c.writer.add(float_tensor(name + ".bias", c.keep_dtype, {static_cast<int64_t>(bias->size())}, *bias)));
  }
  if (c.req.keep_dequantized) c.report.dequantized[name] = std::move(deq);
  return {};
}

Status emit_kept(const Ctx& c, const LinearF32& l) {
  c.kept.push_back(l.name);
  FRUGAL_RETURN_IF_ERROR(c.writer.add(float_tensor(l.name + ".weight", c.keep_dtype, {l.out, l.in}, l.w)));
  if (!l.b.empty()) FRUGAL_RETURN_IF_ERROR(c.writer.add(float_tensor(l.name + ".bias", c.keep_dtype, {l.out}, l.b)));
  c.report.linears.push_back({.name = l.name, .out = l.out, .in = l.in, .kept = true, .err = 0, .err_rtn = 0, .weight_err = 0});
  if (c.req.keep_dequantized) c.report.dequantized[l.name] = l.w;
  return {};
}

// RTN of one source tensor without calibration (any layer layout, MoE experts included).
Status rtn_uncalibrated(const Ctx& c, const model::TensorEntry& e) {
  const std::string name = prefix_of(e.name);
  std::vector<float> w(static_cast<size_t>(e.shape.numel()));
  convert_to_f32(e.dtype, e.data, w.data(), e.shape.numel());
  const int64_t out = e.shape[0], in = e.shape[1];
  if (is_kept(name, c.o.keep)) return emit_kept(c, LinearF32{.name = name, .out = out, .in = in, .w = w, .b = {}});
  std::vector<float> deq;
  FRUGAL_ASSIGN_OR_RETURN(auto ts, rtn_pack(c, name, w, out, in, &deq));
  const double we = weight_error(w, deq);
  c.report.linears.push_back({.name = name, .out = out, .in = in, .kept = false, .err = NAN, .err_rtn = NAN, .weight_err = we});
  return emit_linear(c, name, std::move(ts), std::move(deq), nullptr);
}

// The lm_head by GPTQ on its calibration inputs: the final norm of the residual stream after
// every layer (the layers already quantized, as GPTQ's true-sequential mode sees them), with
// the error table's output errors against RTN on the same inputs.
Status gptq_lm_head(const Ctx& c, const HostCalibration& calib, const model::TensorEntry& lm, const model::TensorEntry& norm) {
  const int64_t n = calib.n_tokens(), out = lm.shape[0], in = lm.shape[1];
  if (norm.shape.ndim != 1 || norm.shape[0] != in)
    return corrupt("tensor model.norm.weight: shape " + norm.shape.to_string() + ", expected [" + std::to_string(in) + "]");
  std::vector<float> w(static_cast<size_t>(lm.shape.numel())), nw(static_cast<size_t>(in));
  convert_to_f32(lm.dtype, lm.data, w.data(), lm.shape.numel());
  convert_to_f32(norm.dtype, norm.data, nw.data(), in);
  const std::vector<float> x = calib.final_norm(nw);
  const GptqOptions go{.spec = int_spec(c.layout), .damp_percent = c.o.damp_percent, .block = c.o.gptq_block,
                       .act_order = c.o.act_order, .static_groups = c.o.static_groups};
  std::optional<GptqFactor> f;
  std::optional<IntQuant> q;
  {
    PhaseTimer t(c.ph, Phases::kFactor);
    FRUGAL_ASSIGN_OR_RETURN(GptqFactor gf, gptq_factor("lm_head", x, n, in, go, c.math));
    f.emplace(std::move(gf));
  }
  {
    PhaseTimer t(c.ph, Phases::kMethod);
    FRUGAL_ASSIGN_OR_RETURN(IntQuant gq, gptq_quantize("lm_head", w, out, *f, go, c.math));
    q.emplace(std::move(gq));
  }
  std::vector<float> deq, rdeq;
  std::vector<OutTensor> ts;
  {
    PhaseTimer t(c.ph, Phases::kPack);
    deq = q->dequantize();
    FRUGAL_ASSIGN_OR_RETURN(ts, pack_gptq("lm_head", *q, c.layout.gptq_v2));
    FRUGAL_RETURN_IF_ERROR(rtn_pack(c, "lm_head", w, out, in, &rdeq, false).status());
  }
  {
    PhaseTimer t(c.ph, Phases::kError);
    c.report.linears.push_back({.name = "lm_head", .out = out, .in = in, .kept = false,
                                .err = relative_output_error(x, n, {}, w, deq, out, in, c.math),
                                .err_rtn = relative_output_error(x, n, {}, w, rdeq, out, in, c.math),
                                .weight_err = weight_error(w, deq)});
  }
  FRUGAL_RETURN_IF_ERROR(c.math.status().with_context("lm_head"));
  PhaseTimer t(c.ph, Phases::kWrite);
  return emit_linear(c, "lm_head", std::move(ts), std::move(deq), nullptr);
}

// Per-stage calibration inputs of one layer.
struct Captured {
  std::vector<float> x[kNumStages];
};

Status calibrated_layer(const Ctx& c, HostCalibration& calib, LayerF32& L) {
  const int64_t n = calib.n_tokens();
  const Method m = c.o.method;
  const IntSpec spec = int_spec(c.layout);
  const bool w8a8 = c.layout.layout == Layout::kCtInt8W8A8;
  Captured cap;
  struct Done {
    std::vector<OutTensor> ts;
    std::vector<float> deq;
  };
  std::map<std::string, Done> done;
  if (m == Method::kGptq) {
    const GptqOptions go{.spec = spec, .damp_percent = c.o.damp_percent, .block = c.o.gptq_block,
                         .act_order = c.o.act_order, .static_groups = c.o.static_groups};
    auto hook = [&](Stage s, const std::vector<float>& x, LayerF32& layer) -> Status {
      std::optional<GptqFactor> f;  // one factorisation per shared input
      for (LinearF32* l : layer.stage_linears(s)) {
        if (is_kept(l->name, c.o.keep)) continue;
        if (!f) {
          PhaseTimer t(c.ph, Phases::kFactor);
          FRUGAL_ASSIGN_OR_RETURN(GptqFactor gf, gptq_factor(l->name, x, n, l->in, go, c.math));
          f.emplace(std::move(gf));
        }
        std::optional<IntQuant> q;
        {
          PhaseTimer t(c.ph, Phases::kMethod);
          FRUGAL_ASSIGN_OR_RETURN(IntQuant gq, gptq_quantize(l->name, l->w, l->out, *f, go, c.math));
          q.emplace(std::move(gq));
        }
        std::vector<float> deq, rdeq;
        std::vector<OutTensor> ts;
        {
          PhaseTimer t(c.ph, Phases::kPack);
          deq = q->dequantize();
          FRUGAL_ASSIGN_OR_RETURN(ts, pack_gptq(l->name, *q, c.layout.gptq_v2));
          FRUGAL_RETURN_IF_ERROR(rtn_pack(c, l->name, l->w, l->out, l->in, &rdeq, false).status());
        }
        PhaseTimer t(c.ph, Phases::kError);
        c.report.linears.push_back({.name = l->name, .out = l->out, .in = l->in, .kept = false,
                                    .err = relative_output_error(x, n, {}, l->w, deq, l->out, l->in, c.math),
                                    .err_rtn = relative_output_error(x, n, {}, l->w, rdeq, l->out, l->in, c.math),
                                    .weight_err = weight_error(l->w, deq)});
        l->w = deq;  // later stages see this linear quantized
        done[l->name] = {std::move(ts), std::move(deq)};
      }
      return {};
    };
    FRUGAL_RETURN_IF_ERROR(calib.run_layer(L, hook));
  } else {
    auto hook = [&](Stage s, const std::vector<float>& x, LayerF32&) -> Status {
      cap.x[static_cast<int>(s)] = x;
      return {};
    };
    FRUGAL_RETURN_IF_ERROR(calib.run_layer(L, hook));  // residual stream: unquantized outputs
    // Input-side scales per stage (1 = none): the quantized weight is Q(W diag(s)) and the
    // stage input becomes x / s (folded into the norm or the producing linear).
    std::vector<float> sc[kNumStages];
    std::optional<PhaseTimer> search(std::in_place, c.ph, Phases::kMethod);
    if (m == Method::kAwq) {
      auto consts = [&](Stage s) {
        std::vector<const LinearF32*> v;
        for (LinearF32* l : L.stage_linears(s)) v.push_back(l);
        return v;
      };
      sc[0] = awq_search_scales(consts(Stage::kQkv), cap.x[0], n, spec, c.o.awq_grid, c.math);
      if (L.v.out == L.o.in) sc[1] = awq_search_scales(consts(Stage::kO), cap.x[1], n, spec, c.o.awq_grid, c.math);
      sc[2] = awq_search_scales(consts(Stage::kGateUp), cap.x[2], n, spec, c.o.awq_grid, c.math);
      sc[3] = awq_search_scales(consts(Stage::kDown), cap.x[3], n, spec, c.o.awq_grid, c.math);
    } else if (m == Method::kSmoothQuant) {
      sc[0] = smoothquant_scales({&L.q, &L.k, &L.v}, cap.x[0], n, c.o.smooth_alpha);
      sc[2] = smoothquant_scales({&L.gate, &L.up}, cap.x[2], n, c.o.smooth_alpha);
    }
    // Fold: producers divide, consumers multiply.
    if (!sc[0].empty())
      for (size_t j = 0; j < sc[0].size(); ++j) L.norm_in[j] /= sc[0][j];
    if (!sc[1].empty()) divide_rows(L.v, sc[1]);
    if (!sc[2].empty())
      for (size_t j = 0; j < sc[2].size(); ++j) L.norm_post[j] /= sc[2][j];
    if (!sc[3].empty()) divide_rows(L.up, sc[3]);
    search.reset();
    for (int s = 0; s < kNumStages; ++s) {
      for (LinearF32* l : L.stage_linears(static_cast<Stage>(s))) {
        // Reference: the weight after output-side folds only (an exact change of basis).
        std::optional<PhaseTimer> method(std::in_place, c.ph, Phases::kMethod);
        std::vector<float> ref = l->w;
        if (!sc[s].empty()) scale_columns(*l, sc[s]);  // kept linears take the fold too
        if (is_kept(l->name, c.o.keep)) continue;
        std::vector<float> xs = cap.x[s];  // the stage input as the quantized model sees it
        if (!sc[s].empty())
          for (int64_t t = 0; t < n; ++t)
            for (int64_t j = 0; j < l->in; ++j) xs[t * l->in + j] /= sc[s][j];
        if (m == Method::kAwq && c.o.awq_clip && s != 0) awq_clip(*l, xs, n, spec, c.math);
        if (m == Method::kAwq && c.o.awq_clip && s == 0 && l != &L.q && l != &L.k) awq_clip(*l, xs, n, spec, c.math);
        method.reset();
        std::vector<float> deq, rdeq;
        std::vector<OutTensor> ts;
        {
          PhaseTimer t(c.ph, Phases::kPack);
          FRUGAL_ASSIGN_OR_RETURN(ts, rtn_pack(c, l->name, l->w, l->out, l->in, &deq));
          FRUGAL_RETURN_IF_ERROR(rtn_pack(c, l->name, ref, l->out, l->in, &rdeq, false).status());
        }
        PhaseTimer et(c.ph, Phases::kError);
        LinearReport rep{.name = l->name, .out = l->out, .in = l->in, .kept = false, .err = 0, .err_rtn = 0,
                         .weight_err = weight_error(l->w, deq)};
        if (w8a8) {
          rep.err = relative_output_error(cap.x[s], n, fake_quant_tokens_int8(cap.x[s], n, l->in, sc[s]), ref, deq, l->out, l->in, c.math);
          rep.err_rtn = relative_output_error(cap.x[s], n, fake_quant_tokens_int8(cap.x[s], n, l->in, {}), ref, rdeq, l->out, l->in, c.math);
        } else {
          rep.err = relative_output_error(cap.x[s], n, xs, ref, deq, l->out, l->in, c.math);
          rep.err_rtn = relative_output_error(cap.x[s], n, {}, ref, rdeq, l->out, l->in, c.math);
        }
        c.report.linears.push_back(rep);
        done[l->name] = {std::move(ts), std::move(deq)};
      }
    }
  }
  // Write the layer: norms (folded), then every linear.
  PhaseTimer wt(c.ph, Phases::kWrite);
  const std::string p = "model.layers." + std::to_string(L.index) + ".";
  FRUGAL_RETURN_IF_ERROR(c.writer.add(float_tensor(p + "input_layernorm.weight", c.keep_dtype, {static_cast<int64_t>(L.norm_in.size())}, L.norm_in)));
  FRUGAL_RETURN_IF_ERROR(c.writer.add(float_tensor(p + "post_attention_layernorm.weight", c.keep_dtype, {static_cast<int64_t>(L.norm_post.size())}, L.norm_post)));
  if (c.req.keep_dequantized) {
    c.report.dequantized[p + "input_layernorm.weight"] = L.norm_in;
    c.report.dequantized[p + "post_attention_layernorm.weight"] = L.norm_post;
  }
  for (int s = 0; s < kNumStages; ++s) {
    for (LinearF32* l : L.stage_linears(static_cast<Stage>(s))) {
      auto it = done.find(l->name);
      if (it == done.end()) {
        FRUGAL_RETURN_IF_ERROR(emit_kept(c, *l));
        continue;
      }
      FRUGAL_RETURN_IF_ERROR(emit_linear(c, l->name, std::move(it->second.ts), std::move(it->second.deq), &l->b));
    }
  }
  return {};
}

Result<std::string> read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found("calibration text " + path + ": cannot open");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Result<std::vector<int32_t>> calibration_tokens(const QuantizeRequest& r) {
  if (!r.calib_ids.empty()) return r.calib_ids;
  const std::string path = r.calib_file.empty() ? r.default_calib_file : r.calib_file;
  if (path.empty()) return invalid_argument("--calib: no calibration text given and no bundled default");
  FRUGAL_ASSIGN_OR_RETURN(std::string text, read_text(path));
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return invalid_argument("calibration text " + path + " is empty");
  FRUGAL_ASSIGN_OR_RETURN(auto tok, Tokenizer::load(r.model_dir));
  std::vector<int32_t> ids = tok->encode(text, {.add_bos = false, .parse_special = false});
  if (static_cast<int64_t>(ids.size()) < r.min_calib_tokens) {
    return invalid_argument("calibration text " + path + " is too short: " + std::to_string(ids.size()) +
                            " tokens, at least " + std::to_string(r.min_calib_tokens) + " are needed");
  }
  return ids;
}

// Tokenizer, generation and template files copied as they are.
bool is_side_file(const std::string& n) {
  if (n == "config.json" || n == "model.safetensors.index.json" || ends_with(n, ".safetensors")) return false;
  return n.rfind("tokenizer", 0) == 0 || n == "generation_config.json" || n == "special_tokens_map.json" ||
         n == "added_tokens.json" || n == "vocab.json" || n == "merges.txt" || ends_with(n, ".jinja") ||
         n.rfind("chat_template", 0) == 0 || ends_with(n, ".model") || ends_with(n, ".tiktoken");
}

}  // namespace

Result<QuantizeReport> quantize_model(const QuantizeRequest& r) {
  const auto t0 = std::chrono::steady_clock::now();
  const QuantizeOptions& o = r.options;
  FRUGAL_ASSIGN_OR_RETURN(Layout layout, choose_layout(o));
  if (r.out_dir.empty()) return invalid_argument("--out: an output directory is required");
  std::error_code ec;
  if (fs::exists(r.out_dir, ec)) return invalid_argument("--out " + r.out_dir + " already exists (frugal quantize never overwrites)");
  const std::string cfg_path = r.model_dir + "/config.json";
  FRUGAL_ASSIGN_OR_RETURN(std::string cfg_text, read_text(cfg_path));
  nlohmann::json cfg = nlohmann::json::parse(cfg_text, nullptr, false);
  if (cfg.is_discarded() || !cfg.is_object()) return corrupt(cfg_path + ": not a JSON object");
  if (cfg.contains("quantization_config")) {
    return invalid_argument(cfg_path + ": the model is already quantized (quantization_config is present); quantize a bf16/f16/f32 checkpoint");
  }
  FRUGAL_ASSIGN_OR_RETURN(model::ModelConfig mc, model::parse_model_config(cfg, cfg_path));
  FRUGAL_ASSIGN_OR_RETURN(auto st, model::SafetensorsSet::open_dir(r.model_dir));
  StoredLayout sl = stored_layout_for(o, layout);

  // Check every weight before writing anything: dtypes, group sizes, packing divisibility.
  auto check_packable = [&](const model::TensorEntry& e, const StoredLayout& sl) -> Status {
    const std::string& name = e.name;
    if (is_kept(prefix_of(name), o.keep)) return Status::ok();
    const int64_t out = e.shape[0], in = e.shape[1];
    if (sl.layout == Layout::kGptq || sl.layout == Layout::kAwqGemm) {
      FRUGAL_RETURN_IF_ERROR(resolve_group(prefix_of(name), in, sl.group).status());
      const int64_t per = sl.layout == Layout::kAwqGemm ? 8 : 32 / sl.bits;
      if (out % per != 0 || (sl.layout == Layout::kGptq && in % per != 0)) {
        return invalid_argument(prefix_of(name) + ": shape [" + std::to_string(out) + ", " + std::to_string(in) + "] cannot be packed by " +
                                layout_name(sl.layout) + " (needs multiples of " + std::to_string(per) + "); --keep it");
      }
    } else if (sl.layout == Layout::kBnbNf4 && (out * in) % sl.group != 0) {
      return invalid_argument("--group-size " + std::to_string(sl.group) + " does not divide the " + std::to_string(out * in) +
                              " elements of " + prefix_of(name));
    }
    return Status::ok();
  };
  DType src_dtype = DType::kF32;
  bool first = true;
  for (const auto& name : st->names()) {
    const model::TensorEntry& e = *st->find(name);
    const bool is_float = e.dtype == DType::kF32 || e.dtype == DType::kF16 || e.dtype == DType::kBF16;
    if (!is_candidate(e)) {
      if (is_float && first) {
        src_dtype = e.dtype;
        first = false;
      }
      continue;
    }
    if (!is_float) return unsupported("tensor " + name + ": dtype " + dtype_name(e.dtype) + "; frugal quantize reads bf16, f16 or f32 checkpoints");
    FRUGAL_RETURN_IF_ERROR(check_packable(e, sl));
  }
  // --lm-head: an untied lm_head, in a layout whose loaders take it quantized.
  const model::TensorEntry* lm_head = st->find("lm_head.weight");
  const bool want_lm_head = o.lm_head || o.lm_head_bits != 0;
  const bool quantize_lm_head = want_lm_head && !is_kept("lm_head", o.keep);
  StoredLayout lm_layout = sl;  // the lm_head's (its own bits with --lm-head-bits)
  if (o.lm_head_bits != 0) {
    if (sl.layout != Layout::kGptq)
      return unsupported(std::string("--lm-head-bits: the ") + layout_name(sl.layout) +
                         " layout holds one format; only GPTQ (a GPTQModel \"dynamic\" rule) gives lm_head its own bits");
    if (o.lm_head_bits != 4 && o.lm_head_bits != 8)
      return invalid_argument("--lm-head-bits " + std::to_string(o.lm_head_bits) + ": expected 4 or 8");
    lm_layout.bits = o.lm_head_bits;
  }
  if (want_lm_head) {
    if (!layout_stores_lm_head(sl.layout))
      return unsupported(std::string("--lm-head: the ") + layout_name(sl.layout) +
                         " layout's loaders expect a dense lm_head; GPTQ (--method rtn/gptq, --format int4/int8) and "
                         "compressed-tensors (--format int8/fp8, w8a8) store it quantized");
    if (mc.tie_word_embeddings || lm_head == nullptr)
      return invalid_argument("--lm-head: " + cfg_path +
                              " ties lm_head to the embedding table (tie_word_embeddings), so there is no separate lm_head to "
                              "quantize");
    if (lm_head->shape.ndim != 2 || !(lm_head->dtype == DType::kF32 || lm_head->dtype == DType::kF16 || lm_head->dtype == DType::kBF16))
      return unsupported("tensor lm_head.weight: dtype " + std::string(dtype_name(lm_head->dtype)) +
                         "; frugal quantize reads bf16, f16 or f32 checkpoints");
    if (quantize_lm_head) FRUGAL_RETURN_IF_ERROR(check_packable(*lm_head, lm_layout));
  }
  const DType keep_dtype = (layout == Layout::kGptq || layout == Layout::kAwqGemm) ? DType::kF16 : src_dtype;

  const bool calibrate = needs_calibration(o.method) || !r.calib_file.empty() || !r.calib_ids.empty();
  std::vector<int32_t> ids;
  std::optional<HostCalibration> calib;
  if (calibrate && r.calib_tokens < r.min_calib_tokens) {
    return invalid_argument("--calib-tokens " + std::to_string(r.calib_tokens) + ": at least " + std::to_string(r.min_calib_tokens) + " are needed");
  }
  if (calibrate) {
    FRUGAL_ASSIGN_OR_RETURN(ids, calibration_tokens(r));
    if (static_cast<int64_t>(ids.size()) < r.min_calib_tokens) {
      return invalid_argument("calibration: " + std::to_string(ids.size()) + " tokens, at least " + std::to_string(r.min_calib_tokens) + " are needed");
    }
    if (static_cast<int64_t>(ids.size()) > r.calib_tokens) ids.resize(static_cast<size_t>(r.calib_tokens));
    const int64_t seq = std::min<int64_t>({r.seq_len, static_cast<int64_t>(ids.size()), mc.max_position_embeddings});
    FRUGAL_ASSIGN_OR_RETURN(HostCalibration hc, HostCalibration::create(mc, *st, ids, seq));
    calib.emplace(std::move(hc));
  }

  // Output into a temporary sibling directory, renamed when complete.
  const fs::path out_path = fs::absolute(r.out_dir);
  if (!fs::is_directory(out_path.parent_path(), ec)) return not_found("--out " + r.out_dir + ": parent directory does not exist");
  std::string tmpl = out_path.string() + ".tmp-XXXXXX";
  if (!mkdtemp(tmpl.data())) return io_error(tmpl + ": cannot create the temporary output directory");
  TmpDir tmp{tmpl};

  QuantizeReport report;
  report.layout = layout;
  report.calib_tokens = calib ? calib->n_tokens() : 0;
  ShardedWriter writer(tmp.path, r.max_shard_bytes);
  std::vector<std::string> kept;
  QuantMath& math = r.math ? *r.math : host_math();
  report.device = math.name();
  if (calib) calib->set_math(math);
  Phases ph;
  const Ctx c{r, o, sl, keep_dtype, writer, report, kept, math, ph};

  // Tensors outside the decoder layers (embeddings, final norm, lm_head) stay in precision. A
  // quantized lm_head is RTN without calibration of its inputs, or with --method gptq GPTQ on
  // them, after the layers (their output is its input).
  const Ctx lc{r, o, lm_layout, keep_dtype, writer, report, kept, math, ph};
  const model::TensorEntry* final_norm = st->find("model.norm.weight");
  const bool gptq_lm = quantize_lm_head && calib && o.method == Method::kGptq;
  if (gptq_lm && final_norm == nullptr)
    return corrupt("--lm-head with --method gptq: no model.norm.weight (the lm_head's calibration inputs are its output)");
  std::map<int64_t, std::vector<std::string>> by_layer;
  for (const auto& name : st->names()) {
    const int64_t li = layer_of(name);
    if (li < 0) {
      if (quantize_lm_head && name == "lm_head.weight") {
        if (!gptq_lm) FRUGAL_RETURN_IF_ERROR(rtn_uncalibrated(lc, *st->find(name)));  // RTN: no calibration of its inputs
        continue;
      }
      FRUGAL_RETURN_IF_ERROR(writer.add(copy_tensor(*st->find(name), src_dtype, keep_dtype)));
    } else {
      by_layer[li].push_back(name);
    }
  }
  Progress progress(r.progress, static_cast<int64_t>(by_layer.size()) + (gptq_lm ? 1 : 0));
  int64_t n_done = 0;
  progress.update(0, "");
  for (auto& [li, names] : by_layer) {
    std::set<std::string> handled;
    ph = Phases{};
    if (calib && li < mc.num_hidden_layers) {
      std::optional<LayerF32> L_read;
      {
        PhaseTimer t(ph, Phases::kRead);
        FRUGAL_ASSIGN_OR_RETURN(LayerF32 lr, read_layer(*st, li));
        L_read.emplace(std::move(lr));
      }
      LayerF32& L = *L_read;
      const auto tl = std::chrono::steady_clock::now();
      FRUGAL_RETURN_IF_ERROR(calibrated_layer(c, *calib, L).with_context("layer " + std::to_string(li)));
      // The calibration forward is what the layer took beyond the timed phases.
      ph.s[Phases::kForward] = std::chrono::duration<double>(std::chrono::steady_clock::now() - tl).count() - ph.s[Phases::kFactor] -
                               ph.s[Phases::kMethod] - ph.s[Phases::kPack] - ph.s[Phases::kError] - ph.s[Phases::kWrite];
      FRUGAL_RETURN_IF_ERROR(math.status().with_context("layer " + std::to_string(li)));
      const std::string p = "model.layers." + std::to_string(li) + ".";
      handled = {p + "input_layernorm.weight", p + "post_attention_layernorm.weight"};
      for (int s = 0; s < kNumStages; ++s)
        for (LinearF32* l : L.stage_linears(static_cast<Stage>(s))) {
          handled.insert(l->name + ".weight");
          handled.insert(l->name + ".bias");
        }
    }
    for (const auto& name : names) {
      if (handled.count(name)) continue;
      const model::TensorEntry& e = *st->find(name);
      if (is_candidate(e)) {
        FRUGAL_RETURN_IF_ERROR(rtn_uncalibrated(c, e));
      } else {
        FRUGAL_RETURN_IF_ERROR(writer.add(copy_tensor(e, src_dtype, keep_dtype)));
      }
    }
    const std::string phases = ph.line();
    progress.update(++n_done, "layer " + std::to_string(li) + (phases.empty() ? "" : ": " + phases));
  }
  if (gptq_lm) {
    ph = Phases{};
    FRUGAL_RETURN_IF_ERROR(gptq_lm_head(lc, *calib, *lm_head, *final_norm));
    const std::string phases = ph.line();
    progress.update(++n_done, "lm_head" + (phases.empty() ? std::string() : ": " + phases));
  }
  FRUGAL_RETURN_IF_ERROR(writer.finish());
  report.out_bytes = writer.total_bytes();

  // config.json: the source config with quantization_config and the stored dtype.
  cfg["quantization_config"] = make_quantization_config(sl, o.method, kept, quantize_lm_head, o.lm_head_bits);
  const char* dt = keep_dtype == DType::kF16 ? "float16" : keep_dtype == DType::kBF16 ? "bfloat16" : "float32";
  cfg["dtype"] = dt;
  if (cfg.contains("torch_dtype")) cfg["torch_dtype"] = dt;
  {
    std::ofstream f(tmp.path + "/config.json");
    f << cfg.dump(2) << "\n";
    if (!f) return io_error(tmp.path + "/config.json: write failed");
  }
  for (const auto& ent : fs::directory_iterator(r.model_dir, ec)) {
    const std::string n = ent.path().filename().string();
    if (ent.is_regular_file() && is_side_file(n)) {
      fs::copy_file(ent.path(), tmp.path + "/" + n, ec);
      if (ec) return io_error(tmp.path + "/" + n + ": " + ec.message());
    }
  }
  // Complete: appear under the final name (never over an existing one).
  if (fs::exists(r.out_dir, ec)) return invalid_argument("--out " + r.out_dir + " appeared while quantizing; left untouched");
  fs::rename(tmp.path, out_path, ec);
  if (ec) return io_error("renaming " + tmp.path + " to " + r.out_dir + ": " + ec.message());
  tmp.keep = true;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

std::string format_report(const QuantizeReport& r, Method m) {
  std::ostringstream os;
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%-44s %11s %12s %12s %12s\n", "linear", "shape", std::string(method_name(m)).append(" err").c_str(),
                "rtn err", "weight err");
  os << buf;
  int64_t cur = -2;
  double lsum = 0, lrtn = 0;
  auto layer_total = [&]() {
    if (cur >= 0 && !std::isnan(lsum)) {
      std::snprintf(buf, sizeof(buf), "%-44s %11s %12.4e %12.4e\n", ("layer " + std::to_string(cur) + " total").c_str(), "", lsum, lrtn);
      os << buf;
    }
  };
  for (const auto& l : r.linears) {
    const int64_t li = layer_of(l.name);
    if (li != cur) {
      layer_total();
      cur = li;
      lsum = lrtn = 0;
    }
    const std::string shape = std::to_string(l.out) + "x" + std::to_string(l.in);
    if (l.kept) {
      std::snprintf(buf, sizeof(buf), "%-44s %11s %12s\n", l.name.c_str(), shape.c_str(), "kept");
    } else {
      std::snprintf(buf, sizeof(buf), "%-44s %11s %12.4e %12.4e %12.4e\n", l.name.c_str(), shape.c_str(), l.err, l.err_rtn, l.weight_err);
      lsum += l.err;
      lrtn += l.err_rtn;
    }
    os << buf;
  }
  layer_total();
  std::snprintf(buf, sizeof(buf), "errors: relative squared output error on %lld calibration tokens (nan: no calibration); %s; %.1f MB in %.1fs on %s\n",
                static_cast<long long>(r.calib_tokens), layout_name(r.layout), static_cast<double>(r.out_bytes) / 1e6, r.seconds, r.device.c_str());
  os << buf;
  return os.str();
}

}  // namespace frugal::quantize
