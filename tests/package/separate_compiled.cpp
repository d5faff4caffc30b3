// The unit of test_package_separate that compiles seqpar's input/output code, once for the
// program (SEQPAR_SEPARATE_COMPILATION).
#include <seqpar/compiled.hpp>
