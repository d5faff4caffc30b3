#pragma once
// Stand-in for the CUDA toolkit's cuda_runtime_api.h on the emulated device (tests/emulation):
// the runtime's host API.

#include "seqpar_emulation/runtime_api.hpp"
