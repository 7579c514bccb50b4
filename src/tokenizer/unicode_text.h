// UTF-8 helpers the tokenizer pipeline shares: validation with U+FFFD replacement, code point
// iteration, the GPT-2 byte<->char table, and normalization forms through utf8proc.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace frugal::tok {

// Length of the UTF-8 sequence a lead byte announces (1 for continuation/invalid bytes, so that
// loops over possibly-broken text always advance).
inline size_t utf8_seq_len(uint8_t lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;
}

// Replaces every ill-formed subsequence with U+FFFD, one per maximal subpart (the rule Rust's
// String::from_utf8_lossy and WHATWG use), so our results match HF's decode on broken bytes.
std::string to_valid_utf8(std::string_view bytes);
// Number of trailing bytes that form an incomplete (but so far valid) UTF-8 sequence.
size_t incomplete_utf8_tail(std::string_view bytes);

// Decodes the code point at `i` of valid UTF-8 and advances `i`.
uint32_t next_code_point(std::string_view s, size_t& i);
void append_utf8(std::string& out, uint32_t cp);

// GPT-2's reversible byte -> printable char map (bytes 0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF map to
// themselves, the rest to U+0100 upwards).
const std::string& byte_to_unicode(uint8_t b);
// Inverse map; returns -1 for a code point that is not in the table.
int unicode_to_byte(uint32_t cp);
// Maps each byte of `text` through byte_to_unicode.
void append_byte_level(std::string& out, std::string_view text);

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };
std::string normalize(std::string_view text, NormalForm form);
std::string to_lower(std::string_view text);
// Rust's char::is_whitespace (Unicode White_Space).
bool is_whitespace(uint32_t cp);
// Rust's char::is_alphanumeric-ish word test used by single_word added tokens.
bool is_word_char(uint32_t cp);

}  // namespace frugal::tok
