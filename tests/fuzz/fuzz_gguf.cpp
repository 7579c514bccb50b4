// libFuzzer target for GGUF vocabulary parsing: any byte string either loads as a tokenizer or
// gives an error; it never reads out of bounds or allocates without limit. Seed it with the
// files in tests/data/shared/tokenizers/gguf-vocab/ (scripts/fuzz.sh does).
#include <cstdint>
#include <cstdlib>

#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = frugal::Tokenizer::from_gguf_bytes(data, size, "fuzz.gguf");
  if (r.is_ok()) {
    const auto ids = (*r)->encode("Hello world 123 \xF0\x9F\xA6\x99");
    for (int32_t id : ids)
      if (id < 0 || id >= (*r)->vocab_size()) std::abort();
    (void)(*r)->decode(ids);
  }
  return 0;
}
