// Must not compile: the self-test of seqpar_add_compile_fail_test (see CMakeLists.txt).
#include <seqpar/core/dtype.hpp>

static_assert(seqpar::dtype_size(seqpar::DType::bf16) == 4,
              "compile-fail probe: bf16 is stored in two bytes, not four");

int main() { return 0; }
