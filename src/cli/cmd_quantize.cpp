// `frugal quantize`: a bf16/f16/f32 HF directory -> an AWQ / GPTQ / compressed-tensors / fp8 /
// nf4 directory, with RTN, AWQ, GPTQ or SmoothQuant. See docs/quantize.md.
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "quantize/quantize.h"
#ifdef FRUGAL_WITH_CUDA
#include "quantize/cuda/cuda_math.h"
#endif

namespace frugal::cli {
namespace {

struct QuantizeArgs {
  std::string model;
  std::string out;
  std::string format;
  std::string method = "rtn";
  int64_t group_size = 0;
  bool sym = false;
  bool act_order = false;
  bool static_groups = false;
  std::string fp8_scale = "block";
  std::string calib;
  int64_t calib_tokens = 2048;
  std::string keep;
  bool no_clip = false;
  bool lm_head = false;
  int32_t lm_head_bits = 0;
  double max_shard_gb = 4.0;
  std::string device = "auto";
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) v.push_back(item);
  return v;
}

Status run_quantize(const QuantizeArgs& a) {
  quantize::QuantizeRequest r;
  r.model_dir = a.model;
  r.out_dir = a.out;
  FRUGAL_ASSIGN_OR_RETURN(r.options.format, quantize::parse_format(a.format));
  FRUGAL_ASSIGN_OR_RETURN(r.options.method, quantize::parse_method(a.method));
  FRUGAL_ASSIGN_OR_RETURN(r.options.fp8_scale, quantize::parse_fp8_scale(a.fp8_scale));
  r.options.group_size = a.group_size;
  r.options.sym = a.sym;
  r.options.act_order = a.act_order;
  r.options.static_groups = a.static_groups;
  r.options.awq_clip = !a.no_clip;
  r.options.keep = split_list(a.keep);
  r.options.lm_head = a.lm_head;
  r.options.lm_head_bits = a.lm_head_bits;
  if (a.calib_tokens <= 0) return invalid_argument("--calib-tokens must be positive");
  if (a.max_shard_gb <= 0) return invalid_argument("--max-shard-gb must be positive");
  r.calib_file = a.calib;
  r.default_calib_file = std::string(FRUGAL_SOURCE_ROOT) + "/data/calib/war-and-peace-ch1-3.txt";
  r.calib_tokens = a.calib_tokens;
  r.max_shard_bytes = static_cast<int64_t>(a.max_shard_gb * 1e9);
  r.progress = true;
  // --device: where calibration and the methods' products run (RTN without calibration has none).
  if (a.device != "auto" && a.device != "cpu" && a.device != "cuda") {
    return invalid_argument("--device " + a.device + ": expected auto, cpu or cuda");
  }
  std::unique_ptr<quantize::QuantMath> gpu;
#ifdef FRUGAL_WITH_CUDA
  if (a.device == "cuda" || (a.device == "auto" && quantize::cuda_quant_device_available())) {
    auto m = quantize::make_cuda_quant_math(0);
    if (!m.is_ok()) return m.status();
    gpu = std::move(*m);
    r.math = gpu.get();
  }
#else
  if (a.device == "cuda") return unsupported("--device cuda: this frugal was built without CUDA (FRUGAL_CUDA=OFF)");
#endif
  FRUGAL_ASSIGN_OR_RETURN(quantize::QuantizeReport rep, quantize::quantize_model(r));
  const std::string table = quantize::format_report(rep, r.options.method);
  std::fwrite(table.data(), 1, table.size(), stdout);
  std::printf("wrote %s\n", a.out.c_str());
  return Status::ok();
}

}  // namespace

void register_quantize(CLI::App& app) {
  auto args = std::make_shared<QuantizeArgs>();
  auto* cmd = app.add_subcommand("quantize", "Quantize a bf16/f16/f32 HF directory (RTN, AWQ, GPTQ, SmoothQuant)");
  cmd->add_option("--model", args->model, "source model directory")->required();
  cmd->add_option("--out", args->out, "output directory (must not exist)")->required();
  cmd->add_option("--format", args->format, "int8|int4|fp8|nf4")->required();
  cmd->add_option("--method", args->method, "rtn|awq|gptq|smoothquant")->capture_default_str();
  cmd->add_option("--group-size", args->group_size, "input columns per scale group (0: layout default, -1: per channel)")
      ->capture_default_str();
  cmd->add_flag("--sym", args->sym, "GPTQ layout: symmetric (zero point fixed at the middle code)");
  cmd->add_flag("--act-order", args->act_order, "GPTQ: quantize columns by decreasing Hessian diagonal (desc_act)");
  cmd->add_flag("--static-groups", args->static_groups, "GPTQ: group scales from the unquantized weights");
  cmd->add_option("--fp8-scale", args->fp8_scale, "fp8 scales: tensor|channel (compressed-tensors) or block (128x128)")
      ->capture_default_str();
  cmd->add_option("--calib", args->calib, "calibration text file (default: data/calib/war-and-peace-ch1-3.txt)");
  cmd->add_option("--calib-tokens", args->calib_tokens, "calibration tokens used at most")->capture_default_str();
  cmd->add_option("--keep", args->keep, "modules kept unquantized: full names or suffixes (o_proj,layers.0.mlp.down_proj)");
  cmd->add_flag("--no-clip", args->no_clip, "AWQ: skip the clipping search");
  cmd->add_flag("--lm-head", args->lm_head,
                "quantize the untied lm_head too (round-to-nearest, the layout's format; GPTQ and compressed-tensors layouts)");
  cmd->add_option("--lm-head-bits", args->lm_head_bits,
                  "GPTQ: the lm_head's own bits, 4 or 8 (a GPTQModel dynamic rule; implies --lm-head)");
  cmd->add_option("--max-shard-gb", args->max_shard_gb, "largest safetensors shard, GB")->capture_default_str();
  cmd->add_option("--device", args->device, "auto|cpu|cuda: where calibration and GPTQ/AWQ math run (auto: cuda when built with it and a GPU is present)")
      ->capture_default_str();
  cmd->callback([args] {
    const Status s = run_quantize(*args);
    if (!s.is_ok()) {
      std::fprintf(stderr, "frugal quantize: %s\n", s.to_string().c_str());
      set_exit_code(s.code() == ErrorCode::kInvalidArgument ? 2 : 1);
    }
  });
}

}  // namespace frugal::cli
