// seqpar's input/output code (safetensors, checkpoints, config.json), compiled once for the
// program: its other units are built with SEQPAR_SEPARATE_COMPILATION and see only the
// declarations (CMakeLists.txt).
#include <seqpar/compiled.hpp>
