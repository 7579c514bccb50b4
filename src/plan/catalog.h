// Catalogs as data: GPUs (data/catalog/gpus.json) and models (data/catalog/models/*.json, or
// any HF config.json / model directory). Users edit or copy them; --catalog DIR points at a copy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/config.h"

namespace frugal::plan {

struct GpuSpec {
  std::string name;  // catalog key, e.g. "rtx-4090"
  std::string display_name;
  std::vector<std::string> aliases;
  double memory_gib = 0;           // datasheet GB read as GiB
  double bandwidth_gb_s = 0;       // datasheet memory bandwidth, 1e9 B/s
  double tflops_bf16 = 0;          // dense tensor-core rates (no sparsity)
  double tflops_fp8 = 0;           // 0: no fp8 tensor cores
  double tflops_int8 = 0;
  int pcie_gen = 4;
  double pcie_gb_s = 0;            // per direction, x16
  double nvlink_gb_s = 0;          // 0: no NVLink, tensor parallelism goes over PCIe
  double allreduce_latency_us = 0;
  double price_usd_per_hour = 0;
  std::string price_source, price_date, spec_source;
  // Ownership cost inputs (optional in the catalog; 0: unknown). The sources name a public
  // document or say "estimate".
  double list_price_usd = 0;
  std::string list_price_source;
  double tdp_w = 0;
  std::string tdp_source;

  int64_t memory_bytes() const { return static_cast<int64_t>(memory_gib * 1024.0 * 1024.0 * 1024.0); }
  // The link tensor-parallel all-reduces use, GB/s per direction.
  double link_gb_s() const { return nvlink_gb_s > 0 ? nvlink_gb_s : pcie_gb_s; }
  std::string link_name() const;
};

struct ModelEntry {
  std::string name;        // catalog name, or the path given
  std::string source;      // file the config came from
  std::string provenance;  // catalog note, empty for a user's config.json
  double published_params_b = 0;         // 0: unknown
  double published_active_params_b = 0;  // MoE only
  model::ModelConfig config;
};

// data/catalog under the source tree unless $FRUGAL_CATALOG is set.
std::string default_catalog_dir();

Result<std::vector<GpuSpec>> load_gpu_catalog(const std::string& catalog_dir);
// Case-insensitive match on name or alias; the error lists the catalog's names.
Result<GpuSpec> find_gpu(const std::vector<GpuSpec>& gpus, const std::string& name);

// `arg` is a catalog model name, a model directory or a config.json path.
Result<ModelEntry> resolve_model(const std::string& arg, const std::string& catalog_dir);
// Catalog model names, sorted.
std::vector<std::string> catalog_model_names(const std::string& catalog_dir);
// Parses one catalog entry ({"name", "provenance", ..., "config": {HF config.json}}).
Result<ModelEntry> load_model_entry(const std::string& path);

}  // namespace frugal::plan
