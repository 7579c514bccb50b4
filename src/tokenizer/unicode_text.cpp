#include "tokenizer/unicode_text.h"

#include <utf8proc.h>

#include <array>
#include <cstdlib>
#include <mutex>

namespace frugal::tok {

namespace {

// Length of the well-formed sequence starting at s[i], or 0 when s[i..] starts an ill-formed
// one; `*subpart` receives the length of the maximal subpart to replace (>= 1).
size_t valid_seq_at(std::string_view s, size_t i, size_t* subpart) {
  auto b = [&](size_t k) -> uint8_t { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = b(i);
  *subpart = 1;
  if (c < 0x80) return 1;
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t k = 1; k <= need; ++k) {
    if (i + k >= s.size()) { *subpart = k; return 0; }
    const uint8_t x = b(i + k);
    const uint8_t l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (x < l || x > h) { *subpart = k; return 0; }
  }
  return need + 1;
}

struct ByteTables {
  std::array<std::string, 256> to_char;
  std::array<int16_t, 512> to_byte{};
  ByteTables() {
    to_byte.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      const uint32_t cp = printable ? static_cast<uint32_t>(b) : 256u + n++;
      append_utf8(to_char[b], cp);
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteTables& byte_tables() {
  static const ByteTables tables;
  return tables;
}

}  // namespace

std::string to_valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t subpart;
    const size_t n = valid_seq_at(s, i, &subpart);
    if (n) {
      out.append(s.data() + i, n);
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      i += subpart;
    }
  }
  return out;
}

size_t incomplete_utf8_tail(std::string_view s) {
  // Walk back over at most 3 continuation bytes to the last lead byte.
  for (size_t back = 1; back <= 4 && back <= s.size(); ++back) {
    const uint8_t c = static_cast<uint8_t>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;
    const size_t len = utf8_seq_len(c);
    return len > back ? back : 0;
  }
  return 0;
}

uint32_t next_code_point(std::string_view s, size_t& i) {
  const uint8_t c = static_cast<uint8_t>(s[i]);
  const size_t n = std::min(utf8_seq_len(c), s.size() - i);
  uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

const std::string& byte_to_unicode(uint8_t b) { return byte_tables().to_char[b]; }

int unicode_to_byte(uint32_t cp) { return cp < 512 ? byte_tables().to_byte[cp] : -1; }

void append_byte_level(std::string& out, std::string_view text) {
  const auto& t = byte_tables().to_char;
  for (char c : text) out += t[static_cast<uint8_t>(c)];
}

namespace {

std::string normalize_all(std::string_view text, NormalForm form);

// Code points below U+0300 are NFC-stable and never combine with what precedes them, so for NFC
// only runs of higher code points (plus the one starter before each) go through utf8proc.
std::string nfc_runs(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0, copied = 0, prev_start = 0;
  while (i < text.size()) {
    const size_t start = i;
    const uint32_t cp = next_code_point(text, i);
    if (cp < 0x300) {
      prev_start = start;
      continue;
    }
    // A run of code points >= U+0300 begins at `start`; include the starter before it.
    const size_t run_begin = start > copied ? prev_start : start;
    size_t run_end = i;
    while (run_end < text.size()) {
      size_t k = run_end;
      if (next_code_point(text, k) < 0x300) break;
      run_end = k;
    }
    out.append(text.substr(copied, run_begin - copied));
    out += normalize_all(text.substr(run_begin, run_end - run_begin), NormalForm::kNfc);
    copied = i = run_end;
    prev_start = run_end;
  }
  out.append(text.substr(copied));
  return out;
}

}  // namespace

std::string normalize(std::string_view text, NormalForm form) {
  if (form == NormalForm::kNfc) return nfc_runs(text);
  return normalize_all(text, form);
}

namespace {

std::string normalize_all(std::string_view text, NormalForm form) {
  if (text.empty()) return {};
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::kNfc: options |= UTF8PROC_COMPOSE; break;
    case NormalForm::kNfd: options |= UTF8PROC_DECOMPOSE; break;
    case NormalForm::kNfkc: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalForm::kNfkd: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* out = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                              static_cast<utf8proc_ssize_t>(text.size()), &out,
                              static_cast<utf8proc_option_t>(options));
  if (n < 0) return std::string(text);  // input is valid UTF-8 by construction; keep it as is
  std::string result(reinterpret_cast<char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

}  // namespace

std::string to_lower(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) append_utf8(out, static_cast<uint32_t>(utf8proc_tolower(
                                               static_cast<utf8proc_int32_t>(next_code_point(text, i)))));
  return out;
}

bool is_whitespace(uint32_t cp) {
  if (cp >= 0x09 && cp <= 0x0D) return true;
  switch (cp) {
    case 0x20: case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F:
    case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

bool is_word_char(uint32_t cp) {
  if (cp == '_') return true;
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
         (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO) ||
         (cat >= UTF8PROC_CATEGORY_MN && cat <= UTF8PROC_CATEGORY_ME);
}

}  // namespace frugal::tok
