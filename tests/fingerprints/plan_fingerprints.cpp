// plan_fingerprints: every family of plans trained for a few steps on ThreadComm ranks,
// one line a run and rank: the bits of each step's loss, gradient norm, rate and loss scale,
// and hashes of the bits of its evaluations, logits, weights, gradients, memory peaks and
// saved checkpoint (and of decoding's tokens, scores and logits). Two builds print the same
// lines exactly when they compute the same: tools/check_arithmetic.sh compares a revision
// with the working tree.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>

#include "fingerprint.hpp"

namespace seqpar::fingerprint {
void data_runs(Record& rec);
void model_runs(Record& rec);
void step_runs(Record& rec);
}  // namespace seqpar::fingerprint

int main() {
  using namespace seqpar::fingerprint;
  std::string dir =
      (std::filesystem::temp_directory_path() / "seqpar_fingerprints_XXXXXX").string();
  if (!mkdtemp(dir.data())) {
    std::perror("plan_fingerprints: mkdtemp");
    return 2;
  }
  Record rec;
  rec.dir = dir;
  int status = 0;
  try {
    data_runs(rec);
    model_runs(rec);
    step_runs(rec);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "plan_fingerprints: %s\n", e.what());
    status = 1;
  }
  std::filesystem::remove_all(dir);
  std::sort(rec.lines.begin(), rec.lines.end());
  for (const auto& l : rec.lines) std::printf("%s\n", l.c_str());
  return status;
}
