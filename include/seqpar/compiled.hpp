#pragma once
// The definitions of seqpar's non-template input/output code, for the one translation unit
// of a program built with SEQPAR_SEPARATE_COMPILATION that compiles them
// (core/separate_compilation.hpp). That unit is one line, `#include <seqpar/compiled.hpp>`,
// compiled with the program's flags and components (the tokenizer's definitions need
// seqpar::tokenizer, as its header does).

#if !defined(SEQPAR_SEPARATE_COMPILATION)
#error \
    "seqpar/compiled.hpp is for programs built with SEQPAR_SEPARATE_COMPILATION defined in every unit; without it the headers define everything themselves"
#endif

#include "seqpar/data/impl/char_tokenizer.hpp"       // write_char_tokenizer
#include "seqpar/data/impl/classification_task.hpp"  // ClassificationTask's JSON
#include "seqpar/data/impl/cluener.hpp"              // read_cluener
#include "seqpar/data/impl/conll.hpp"                // read_conll, write_conll
#include "seqpar/data/impl/json_records.hpp"    // read_classification, read_relations, read_texts
#include "seqpar/data/impl/ner_task.hpp"        // NerTask's JSON
#include "seqpar/data/impl/predictions.hpp"     // write_prediction_lines, write_cluener_submission
#include "seqpar/data/impl/relation_task.hpp"   // RelationTask's JSON
#include "seqpar/io/impl/hf_config.hpp"         // read_bloom_config
#include "seqpar/io/impl/safetensors.hpp"       // SafetensorsFile, write_safetensors
#include "seqpar/io/impl/torch_checkpoint.hpp"  // TorchCheckpoint (zip and pickle)
#if defined(SEQPAR_WITH_ONIGURUMA)
#include "seqpar/io/impl/tokenizer.hpp"  // Tokenizer
#endif
