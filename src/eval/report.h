// --json and --csv outputs of frugal eval (schemas in docs/eval.md).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace frugal::eval {

Status write_json_file(const std::string& path, const nlohmann::ordered_json& j);

// CSV with a header row: every row is a JSON object of scalars with the header's keys (missing
// keys are empty cells); strings are quoted when needed (RFC 4180).
Status write_csv_file(const std::string& path, const std::vector<std::string>& header,
                      const std::vector<nlohmann::ordered_json>& rows);

// "12.345 ± 0.067" with `digits` decimals.
std::string pm(double value, double err, int digits = 4);

}  // namespace frugal::eval
