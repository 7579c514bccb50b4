// Total cost of ownership: what an hour of an owned GPU costs, and so a million output tokens,
// beside the rental price (docs/plan.md, "Ownership cost").
//   capex/h  = purchase USD / (years x 8760 h)
//   ops/h    = operations USD per year / 8760 h        (hosting, maintenance, share of the server)
//   energy/h = power W / 1000 x utilization x USD/kWh  (power while serving: measured by NVML
//              or the catalog's TDP; idle hours are not charged energy)
//   USD/h    = capex/h + ops/h + energy/h              (per GPU, per wall-clock hour)
//   USD per 1M output tokens = N x USD/h / (tok/s x 3600 x utilization) x 1e6
// utilization is the fraction of wall-clock hours the GPU serves at the planned rate: the owner
// pays for every hour, rented or not, but produces tokens only in busy ones.
#pragma once

#include <string>

#include "core/status.h"
#include "plan/catalog.h"

namespace frugal::plan {

struct OwnershipInputs {
  double purchase_usd = -1;     // per GPU; < 0: the catalog's list price
  double years = 3;             // amortization period
  double usd_per_kwh = 0.15;
  double utilization = 1.0;     // fraction of hours serving, (0, 1]
  double ops_usd_per_year = 0;  // per GPU
  double power_w = -1;          // per GPU while serving; < 0: the catalog's TDP
  std::string power_source;     // filled by resolve: "rated TDP (catalog: ...)" or the caller's
  std::string purchase_source;  // filled by resolve: "catalog: ..." or "--purchase-usd"
};

struct OwnershipCost {
  double purchase_usd = 0;
  std::string purchase_source;
  double power_w = 0;
  std::string power_source;
  double capex_per_hour = 0;   // per GPU
  double ops_per_hour = 0;
  double energy_per_hour = 0;
  double usd_per_hour = 0;     // per GPU, wall-clock hour
  double usd_per_m_tokens = 0; // for the whole configuration
  double kwh_per_m_tokens = 0; // energy per 1M output tokens, all GPUs
};

// Fills the catalog's list price and TDP where the inputs leave them unset and checks ranges;
// the error names the flag (or the GPU without a catalog price).
Result<OwnershipInputs> resolve_ownership(OwnershipInputs in, const GpuSpec& gpu);

// `in` must be resolved; tok_per_s is the configuration's output rate (all n_gpus together).
OwnershipCost ownership_cost(const OwnershipInputs& in, int n_gpus, double tok_per_s);

// Rent: price per GPU-hour x N / (tok/s x 3600) x 1e6.
double rent_usd_per_m_tokens(double price_per_gpu_hour, int n_gpus, double tok_per_s);

}  // namespace frugal::plan
