#pragma once
// The umbrella header: everything public in seqpar. CUDA parts compile only under nvcc.

#include "seqpar/core/error.hpp"        // seqpar::Error and SEQPAR_CHECK
#include "seqpar/core/dtype.hpp"        // DType, f16/bf16 conversions
#include "seqpar/io/tensor_source.hpp"  // TensorEntry, read_tensor
