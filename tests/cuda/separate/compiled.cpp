// seqpar's input/output code for test_cuda_separate, compiled once.
#include <seqpar/compiled.hpp>
