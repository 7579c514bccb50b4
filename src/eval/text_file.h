// Reading eval data files: whole text files, checked to be valid UTF-8, errors naming the
// file and line.
#pragma once

#include <cstdint>

#include <string>
#include <string_view>

#include "core/status.h"

namespace frugal::eval {

// The file's bytes. Errors: unreadable file; invalid UTF-8 (names the line and byte column).
// `allow_empty` false: an empty (or whitespace-only) file is an error too.
Result<std::string> read_text_file(const std::string& path, bool allow_empty = false);

// First invalid UTF-8 sequence in `s` as a byte offset, or npos when it is all valid.
size_t find_invalid_utf8(std::string_view s);

// 1-based line of byte offset `pos` in `s`.
int64_t line_of(std::string_view s, size_t pos);

}  // namespace frugal::eval
