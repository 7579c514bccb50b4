// RFC 4180 CSV: fields separated by ',', optionally quoted with '"' ('""' is a quote inside a
// quoted field; quoted fields may hold ',' and line breaks); records end at LF or CRLF.
// A '"' inside an unquoted field is taken literally (as Python's csv module does).
#pragma once

#include <cstdint>

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace frugal::eval {

struct CsvRecord {
  int64_t line = 0;  // 1-based line where the record starts
  std::vector<std::string> fields;
};

// Parses the whole text; `source` names the file in errors (unterminated quoted field,
// text after a closing quote). Blank lines are skipped.
Result<std::vector<CsvRecord>> parse_csv(std::string_view text, const std::string& source);

}  // namespace frugal::eval
