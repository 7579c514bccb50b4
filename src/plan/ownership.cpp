#include "plan/ownership.h"

namespace frugal::plan {
namespace {
constexpr double kHoursPerYear = 8760.0;
}

Result<OwnershipInputs> resolve_ownership(OwnershipInputs in, const GpuSpec& gpu) {
  if (in.purchase_usd < 0) {
    if (gpu.list_price_usd <= 0) {
      return invalid_argument("GPU '" + gpu.name + "' has no list_price_usd in the catalog: pass --purchase-usd");
    }
    in.purchase_usd = gpu.list_price_usd;
    in.purchase_source = "catalog list price (" + gpu.list_price_source + ")";
  } else if (in.purchase_source.empty()) {
    in.purchase_source = "--purchase-usd";
  }
  if (!(in.years > 0)) return invalid_argument("--years: expected > 0, got " + std::to_string(in.years));
  if (!(in.usd_per_kwh >= 0)) return invalid_argument("--usd-per-kwh: expected >= 0");
  if (!(in.utilization > 0 && in.utilization <= 1)) {
    return invalid_argument("--utilization: expected a fraction in (0, 1], got " + std::to_string(in.utilization));
  }
  if (!(in.ops_usd_per_year >= 0)) return invalid_argument("--ops-usd-per-year: expected >= 0");
  if (in.power_w < 0) {
    if (gpu.tdp_w <= 0) return invalid_argument("GPU '" + gpu.name + "' has no tdp_w in the catalog");
    in.power_w = gpu.tdp_w;
    in.power_source = "rated TDP (catalog: " + gpu.tdp_source + ")";
  } else if (in.power_source.empty()) {
    in.power_source = "given";
  }
  return in;
}

OwnershipCost ownership_cost(const OwnershipInputs& in, int n_gpus, double tok_per_s) {
  OwnershipCost c;
  c.purchase_usd = in.purchase_usd;
  c.purchase_source = in.purchase_source;
  c.power_w = in.power_w;
  c.power_source = in.power_source;
  c.capex_per_hour = in.purchase_usd / (in.years * kHoursPerYear);
  c.ops_per_hour = in.ops_usd_per_year / kHoursPerYear;
  c.energy_per_hour = in.power_w / 1000.0 * in.utilization * in.usd_per_kwh;
  c.usd_per_hour = c.capex_per_hour + c.ops_per_hour + c.energy_per_hour;
  const double tokens_per_wall_hour = tok_per_s * 3600.0 * in.utilization;
  c.usd_per_m_tokens = n_gpus * c.usd_per_hour / tokens_per_wall_hour * 1e6;
  // Energy per token: the GPUs draw power_w for the seconds one million tokens take.
  c.kwh_per_m_tokens = n_gpus * in.power_w / 1000.0 * (1e6 / tok_per_s) / 3600.0;
  return c;
}

double rent_usd_per_m_tokens(double price_per_gpu_hour, int n_gpus, double tok_per_s) {
  return price_per_gpu_hour * n_gpus / (tok_per_s * 3600.0) * 1e6;
}

}  // namespace frugal::plan
