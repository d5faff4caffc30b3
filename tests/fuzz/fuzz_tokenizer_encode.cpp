// libFuzzer target: arbitrary bytes encoded by fixed tokenizers (byte-level BPE with
// added tokens; a GPT-2 style pipeline). Every id must be a token of the vocabulary and
// decoding must give valid UTF-8. (The fixtures' small vocabularies lack some of the 256
// byte tokens, so decode(encode(text)) == text is not theirs to promise.)
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_util.hpp"
#include "seqpar/io/tokenizer.hpp"

#ifndef SEQPAR_TEST_DIR
#error "SEQPAR_TEST_DIR must name the tests folder (its fixtures hold the tokenizers)"
#endif

namespace {
const std::vector<seqpar::Tokenizer>& tokenizers() {
  static const std::vector<seqpar::Tokenizer> all = [] {
    std::vector<seqpar::Tokenizer> t;
    for (const char* name : {"bpe500_added.json", "gpt2_style.json"})
      t.push_back(seqpar::Tokenizer::from_file(std::string(SEQPAR_TEST_DIR) +
                                               "/fixtures/tokenizer/" + name));
    return t;
  }();
  return all;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = seqpar::fuzz::as_text(data, size);
  for (const seqpar::Tokenizer& tok : tokenizers()) {
    const std::vector<std::int32_t> ids = tok.encode(text);
    for (const std::int32_t id : ids)
      if (id < 0 || static_cast<std::size_t>(id) >= tok.vocab_size() ||
          tok.id_to_token(id).empty()) {
        std::fprintf(stderr, "encode gave id %d, not a token (vocab_size %zu)\n", id,
                     tok.vocab_size());
        std::abort();
      }
    if (!seqpar::detail::utf8_valid(tok.decode(ids))) {
      std::fprintf(stderr, "decode(encode(text)) is not valid UTF-8\n");
      std::abort();
    }
    (void)tok.pre_tokenize(text);
  }
  return 0;
}
