#pragma once
// Stand-in for the CUDA toolkit's cuda_fp16.h on the emulated device (tests/emulation).

#include "seqpar_emulation/half_types.hpp"
