#pragma once
// SEQPAR_DECL and SEQPAR_SEPARATE_COMPILATION: where seqpar's non-template input/output
// code (safetensors, pytorch_model.bin, tokenizer.json, config.json, the data readers) is
// compiled.
//
// seqpar is header-only: by default each header holds that code's definitions, inline, and
// every translation unit that calls it compiles and optimises it again. A program whose
// units all define SEQPAR_SEPARATE_COMPILATION sees only declarations in the headers and
// compiles the definitions once, in the one unit that includes <seqpar/compiled.hpp>
// (docs/building.md). A program of one unit gains nothing from it; one of many trainer units
// gains most of their input/output code's compile time.

/// Declares (and, in the headers' definitions, defines) a non-template function of seqpar:
/// `inline` when the definitions are in the headers, nothing when the program compiles them
/// once.
#if defined(SEQPAR_SEPARATE_COMPILATION)
#define SEQPAR_DECL
#else
#define SEQPAR_DECL inline
#endif
