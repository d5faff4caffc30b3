// The CUDA backend's kernels (Ops<Cuda>), compiled once for the program by nvcc: its other
// units, the CUDA trainers included, are compiled by the host compiler and see the ops
// declared only (CMakeLists.txt).
#include <seqpar/compiled_cuda.hpp>
