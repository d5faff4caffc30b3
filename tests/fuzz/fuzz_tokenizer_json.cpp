// libFuzzer target: a tokenizer.json loaded (the streaming vocabulary/merges reader, the
// pre-tokenizer and added-token tables), then the tokenizer it accepts used once: a
// fixed text encoded, pre-tokenized and decoded, every id checked against vocab_size().
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "fuzz_util.hpp"
#include "seqpar/io/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const seqpar::fuzz::ScratchFile scratch(".json");
  const auto& path = scratch.write(seqpar::fuzz::as_text(data, size));
  seqpar::fuzz::expect_clean([&] {
    const auto tok = seqpar::Tokenizer::from_file(path);
    const auto ids = tok.encode("Hello world, 你好 <s>  \xf0\x9f\x98\x80 ab\tcd\n\xff</s>");
    for (const std::int32_t id : ids)
      if (id < 0 || static_cast<std::size_t>(id) >= tok.vocab_size()) std::abort();
    (void)tok.pre_tokenize("Hello  world 123");
    (void)tok.decode(ids, true);
    (void)tok.token_to_id(tok.id_to_token(0));
  });
  return 0;
}
