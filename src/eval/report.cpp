#include "eval/report.h"

#include <cstdio>
#include <fstream>

namespace frugal::eval {

Status write_json_file(const std::string& path, const nlohmann::ordered_json& j) {
  std::ofstream f(path);
  if (!f) return io_error(path + ": cannot create the file");
  f << j.dump(1) << "\n";
  if (!f) return io_error(path + ": write failed");
  return Status::ok();
}

namespace {

std::string cell(const nlohmann::ordered_json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) {
      if (c == '"') q += '"';
      q += c;
    }
    return q + "\"";
  }
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_float()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.10g", v.get<double>());
    return buf;
  }
  return v.dump();
}

}  // namespace

Status write_csv_file(const std::string& path, const std::vector<std::string>& header,
                      const std::vector<nlohmann::ordered_json>& rows) {
  std::ofstream f(path);
  if (!f) return io_error(path + ": cannot create the file");
  for (size_t i = 0; i < header.size(); ++i) f << (i ? "," : "") << header[i];
  f << "\n";
  for (const auto& r : rows) {
    for (size_t i = 0; i < header.size(); ++i) {
      f << (i ? "," : "");
      if (r.contains(header[i])) f << cell(r[header[i]]);
    }
    f << "\n";
  }
  if (!f) return io_error(path + ": write failed");
  return Status::ok();
}

std::string pm(double value, double err, int digits) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.*f ± %.*f", digits, value, digits, err);
  return buf;
}

}  // namespace frugal::eval
