// Number formatting shared by the planner's arithmetic lines and its text report.
#pragma once

#include <cstdint>
#include <string>

namespace frugal::plan {

std::string with_commas(int64_t v);          // 57344 -> "57,344"
std::string gib(double bytes);               // "14.19 GiB"
std::string human_bytes(double bytes);       // GiB from 1 GiB up, MiB below
std::string gb(double bytes);                // "15.23 GB" (1e9)
std::string billions(double n);              // "7.616 B"
std::string fixed(double v, int decimals);   // "0.75"
std::string usd(double v);                   // "$0.0123" / "$12.34"
std::string seconds(double s);               // "12.3 ms" / "1.23 s"

}  // namespace frugal::plan
