// The Ops<Cuda> kernels of test_cuda_separate, compiled once by nvcc.
#include <seqpar/compiled_cuda.hpp>
