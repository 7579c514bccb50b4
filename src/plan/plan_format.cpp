#include "plan/plan_format.h"

#include <cmath>
#include <cstdio>

namespace frugal::plan {

std::string with_commas(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

std::string gib(double bytes) { return fixed(bytes / (1024.0 * 1024.0 * 1024.0), 2) + " GiB"; }
std::string human_bytes(double bytes) {
  if (bytes >= 1024.0 * 1024.0 * 1024.0) return gib(bytes);
  return fixed(bytes / (1024.0 * 1024.0), 2) + " MiB";
}

std::string gb(double bytes) { return fixed(bytes / 1e9, 2) + " GB"; }
std::string billions(double n) { return fixed(n / 1e9, 3) + " B"; }

std::string usd(double v) {
  if (!std::isfinite(v)) return "n/a";
  return "$" + fixed(v, v < 1 ? 4 : 2);
}

std::string seconds(double s) {
  if (s < 1.0) return fixed(s * 1e3, s < 0.01 ? 3 : 1) + " ms";
  return fixed(s, 2) + " s";
}

}  // namespace frugal::plan
