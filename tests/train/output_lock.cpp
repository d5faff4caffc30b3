// The output folder's lock under starts that race (OutputLock, train/run_folder.hpp): of
// several processes started at once over a stale lock exactly one takes it, every time; a
// lock that names no process is never taken over; a file where the folder should be is
// refused, naming it. A program of its own (test_output_lock): it forks, and it builds in
// seconds where test_train takes minutes.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../support/errors.hpp"
#include "../support/files.hpp"
#include "seqpar/train/run_folder.hpp"

using namespace seqpar;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
  REQUIRE(f.good());
}

using test::error_of;

// `starts` processes, released together, each taking the lock at `lock`; a winner keeps it
// (and lives) until every start has answered, then ends without releasing it, so that the
// next round races over its stale lock. Returns how many took it.
int race(const fs::path& lock, int starts) {
  int go[2], answers[2], release[2];
  REQUIRE(::pipe(go) == 0);
  REQUIRE(::pipe(answers) == 0);
  REQUIRE(::pipe(release) == 0);
  std::vector<pid_t> children;
  for (int i = 0; i < starts; ++i) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(go[1]);
      ::close(answers[0]);
      ::close(release[1]);
      char c;
      (void)::read(go[0], &c, 1);  // returns once the parent closes its end
      bool took = false;
      try {
        const OutputLock held(lock);
        took = true;
        (void)::write(answers[1], "W", 1);
        (void)::read(release[0], &c, 1);
        ::_exit(0);  // ends holding it: a stale lock for the next round
      } catch (...) {
      }
      if (!took) (void)::write(answers[1], "L", 1);
      ::_exit(1);
    }
    children.push_back(pid);
  }
  ::close(go[0]);
  ::close(answers[1]);
  ::close(release[0]);
  ::close(go[1]);  // go
  int won = 0;
  for (int i = 0; i < starts; ++i) {
    char c = 0;
    REQUIRE(::read(answers[0], &c, 1) == 1);
    won += c == 'W';
  }
  ::close(release[1]);
  ::close(answers[0]);
  for (const pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
  return won;
}

}  // namespace

TEST_CASE("starts racing over a stale lock: exactly one takes it, every time") {
  test::TempDir dir;
  const fs::path lock = dir / "seqpar.lock";
  write(lock, "2147483647 " + host_name() + "\n");  // a process of this host that is gone
  for (int round = 0; round < 60; ++round) {
    CAPTURE(round);
    REQUIRE(race(lock, 3) == 1);
  }
}

TEST_CASE("a lock that names no process is not taken over; nothing half-written is left") {
  test::TempDir dir;
  const fs::path lock = dir / "seqpar.lock";
  for (const std::string& text :
       std::vector<std::string>{"", "\n", "garbage\n", "0 " + host_name() + "\n"}) {
    CAPTURE(text);
    write(lock, text);
    const std::string e = error_of([&] { OutputLock again(lock); });
    CHECK(e.find(lock.string() + " names no run") != std::string::npos);
    CHECK(e.find("remove it once no run uses this folder") != std::string::npos);
    CHECK(error_of([&] { OutputLock::check_free(lock); }) == e);
    std::ifstream f(lock);
    CHECK(std::string(std::istreambuf_iterator<char>(f), {}) == text);  // left as it was
  }
  fs::remove(lock);
  {
    const OutputLock held(lock);
    const auto h = OutputLock::holder(lock);
    REQUIRE(h);
    CHECK(h->known);
    CHECK(h->pid == ::getpid());
  }
  // Only the guard is left behind: no temporary of the lock's text.
  CHECK(dir.listing() == std::vector<std::string>{"seqpar.lock.guard"});
}

TEST_CASE("an output folder that is a file is refused before anything is written, naming it") {
  test::TempDir dir;
  const fs::path file = dir / "out";
  write(file, "x");
  const std::string e = error_of([&] { RunFolder f(RunSpec{.output_dir = file}); });
  CHECK(e.find("RunSpec::output_dir " + file.string() + " is a file, not a folder") !=
        std::string::npos);
  CHECK(dir.listing() == std::vector<std::string>{"out"});
}
