// require_agreement: ranks given the same values pass; ranks given different ones (other
// values, fewer pairs, a far longer text) all throw the same message naming the ranks and
// the values, without a mismatched collective in between.
#include <doctest/doctest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "comm_test_util.hpp"
#include "seqpar/comm/agreement.hpp"
#include "seqpar/comm/any_comm.hpp"
#include "seqpar/comm/thread_comm.hpp"

using namespace seqpar;
using namespace std::chrono_literals;

namespace {

// Runs require_agreement on n ranks with values(rank); returns each rank's outcome.
template <class Values>
std::vector<std::string> agree(int n, Values values) {
  comm_test::Outcome outcome(n);
  comm_test::timed_within(10s, [&] {
    try {
      run_ranks(n, [&](ThreadComm& c) {
        try {
          AnyComm any(c);  // as a trainer's program holds its world
          require_agreement(any, values(c.rank()));
          c.barrier();  // the ranks are still in step after it
        } catch (const Error& e) {
          outcome.set(c.rank(), e.what());
        }
      });
    } catch (...) {
    }
  });
  return outcome.messages;
}

}  // namespace

TEST_CASE("ranks given the same values agree, in any order of the pairs") {
  for (int n : {1, 2, 3, 8}) {
    const auto m = agree(n, [](int r) {
      AgreedValues v = {{"plan", "tp2"}, {"batch_size", "8"}, {"data.sha256", "ab12"}};
      if (r % 2) std::swap(v[0], v[2]);
      return v;
    });
    for (const auto& x : m) CHECK(x == "<returned>");
  }
  CHECK(agree(3, [](int) { return AgreedValues{}; }) == std::vector<std::string>(3, "<returned>"));
}

TEST_CASE("ranks that differ all throw the same message naming the ranks and the values") {
  const auto m = agree(4, [](int r) {
    return AgreedValues{
        {"plan", r == 3 ? "dp4" : "tp2"}, {"batch_size", r % 2 ? "16" : "8"}, {"seed", "42"}};
  });
  const std::string want =
      "ranks disagree on what must be equal on all 4 of them (a plan, an option, the data, the "
      "checkpoint):\n"
      "  plan: ranks 0-2 'tp2'; rank 3 'dp4'\n"
      "  batch_size: ranks 0, 2 '8'; ranks 1, 3 '16'";
  for (const auto& x : m) CHECK(x == want);
}

TEST_CASE("ranks with other names, missing pairs or duplicates are named too") {
  const auto m = agree(3, [](int r) {
    AgreedValues v = {{"plan", "tp2"}};
    if (r == 0) v.push_back({"max_steps", "100"});
    if (r == 1) v.push_back({"max_steps", "200"});
    if (r == 2) v.push_back({"resume", "step-8.safetensors"});
    if (r == 2) v.push_back({"plan", "tp2"});
    return v;
  });
  const std::string want =
      "ranks disagree on what must be equal on all 3 of them (a plan, an option, the data, the "
      "checkpoint):\n"
      "  plan: ranks 0, 1 'tp2'; rank 2 (given 2 times: 'tp2', 'tp2')\n"
      "  max_steps: rank 0 '100'; rank 1 '200'; rank 2 (not given)\n"
      "  resume: ranks 0, 1 (not given); rank 2 'step-8.safetensors'";
  for (const auto& x : m) CHECK(x == want);
}

TEST_CASE("a rank with a far longer text is compared safely and its value cut in the message") {
  const std::string huge(100000, 'x');
  const auto m = agree(2, [&](int r) {
    return AgreedValues{{"tokenizer", r == 1 ? huge : "a"}, {"", ""}};
  });
  for (const auto& x : m) {
    CAPTURE(x);
    CHECK(x.ends_with("  tokenizer: rank 0 'a'; rank 1 '" + std::string(120, 'x') +
                      "...' (100000 bytes)"));
  }
}

TEST_CASE("the rank list is compact") {
  using detail::agreement::rank_list;
  CHECK(rank_list({3}) == "rank 3");
  CHECK(rank_list({0, 1}) == "ranks 0, 1");
  CHECK(rank_list({0, 1, 2, 5, 7, 8, 9}) == "ranks 0-2, 5, 7-9");
}
