#include "eval/text_file.h"

#include <cstdint>
#include <fstream>
#include <sstream>

namespace frugal::eval {

size_t find_invalid_utf8(std::string_view s) {
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned c = b[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0;
    if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07;
    else return i;
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((b[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (b[i + k] & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are invalid (RFC 3629).
    const uint32_t min_cp = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

int64_t line_of(std::string_view s, size_t pos) {
  int64_t line = 1;
  for (size_t i = 0; i < pos && i < s.size(); ++i)
    if (s[i] == '\n') ++line;
  return line;
}

Result<std::string> read_text_file(const std::string& path, bool allow_empty) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found(path + ": cannot open the file");
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return io_error(path + ": read failed");
  std::string s = std::move(ss).str();
  const size_t bad = find_invalid_utf8(s);
  if (bad != std::string_view::npos) {
    const int64_t line = line_of(s, bad);
    const size_t line_start = s.rfind('\n', bad == 0 ? 0 : bad - 1);
    const size_t col = line_start == std::string::npos || bad == 0 ? bad + 1 : bad - line_start;
    return corrupt(path + ":" + std::to_string(line) + ": invalid UTF-8 at byte " + std::to_string(col) +
                   " of the line (byte offset " + std::to_string(bad) + " in the file)");
  }
  if (!allow_empty && s.find_first_not_of(" \t\r\n") == std::string::npos)
    return invalid_argument(path + ": the file is empty");
  return s;
}

}  // namespace frugal::eval
