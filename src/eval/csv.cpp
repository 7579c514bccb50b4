#include "eval/csv.h"

namespace frugal::eval {

Result<std::vector<CsvRecord>> parse_csv(std::string_view text, const std::string& source) {
  std::vector<CsvRecord> out;
  size_t i = 0;
  const size_t n = text.size();
  int64_t line = 1;
  // A UTF-8 byte-order mark is not part of the first field.
  if (text.substr(0, 3) == "\xEF\xBB\xBF") i = 3;
  while (i < n) {
    // Blank line.
    if (text[i] == '\n' || (text[i] == '\r' && i + 1 < n && text[i + 1] == '\n')) {
      i += text[i] == '\r' ? 2 : 1;
      ++line;
      continue;
    }
    CsvRecord rec{.line = line, .fields = {}};
    while (true) {
      std::string field;
      if (i < n && text[i] == '"') {
        const int64_t start_line = line;
        ++i;
        while (true) {
          if (i >= n)
            return corrupt(source + ":" + std::to_string(start_line) + ": quoted field " +
                           std::to_string(rec.fields.size() + 1) + " is never closed (missing '\"')");
          const char c = text[i];
          if (c == '"') {
            if (i + 1 < n && text[i + 1] == '"') {
              field += '"';
              i += 2;
              continue;
            }
            ++i;
            break;
          }
          if (c == '\n') ++line;
          field += c;
          ++i;
        }
        if (i < n && text[i] != ',' && text[i] != '\n' && !(text[i] == '\r' && i + 1 < n && text[i + 1] == '\n'))
          return corrupt(source + ":" + std::to_string(line) + ": field " + std::to_string(rec.fields.size() + 1) +
                         " has text after its closing quote (expected ',' or the end of the line)");
      } else {
        while (i < n && text[i] != ',' && text[i] != '\n' && !(text[i] == '\r' && i + 1 < n && text[i + 1] == '\n'))
          field += text[i++];
      }
      rec.fields.push_back(std::move(field));
      if (i < n && text[i] == ',') {
        ++i;
        continue;
      }
      // End of record: LF, CRLF or end of text.
      if (i < n) {
        i += text[i] == '\r' ? 2 : 1;
        ++line;
      }
      break;
    }
    out.push_back(std::move(rec));
  }
  return out;
}

}  // namespace frugal::eval
