// Compiles: a compile-fail test over this file must fail (registered with WILL_FAIL).
#include <seqpar/core/dtype.hpp>

static_assert(seqpar::dtype_size(seqpar::DType::bf16) == 2,
              "compile-fail probe: bf16 is stored in two bytes");

int main() { return 0; }
