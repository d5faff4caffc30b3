#pragma once
// EventFileWriter: a TensorBoard event file, events.out.tfevents.<seconds>.<host>. Each
// record is TensorFlow's framing (length as 8 bytes little-endian, its masked CRC-32C, the
// data, the data's masked CRC-32C) around an Event message, whose protocol-buffer encoding is
// written here by hand: no protobuf dependency.

#include <algorithm>
#include <bit>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include "seqpar/core/crc32c.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::inline v0 {

/// One value of a TensorBoard summary: its tag ("train/loss") and the number.
struct Scalar {
  std::string tag;
  float value = 0;
};

namespace detail::tfevents {

inline constexpr std::string_view file_prefix = "events.out.tfevents.";

// The protocol-buffer wire types used: varint, 64-bit, length-delimited, 32-bit.
enum Wire : std::uint32_t { varint = 0, fixed64 = 1, length = 2, fixed32 = 5 };

inline void put_varint(std::string& out, std::uint64_t v) {
  for (; v >= 0x80; v >>= 7) out += static_cast<char>((v & 0x7f) | 0x80);
  out += static_cast<char>(v);
}
inline void put_key(std::string& out, std::uint32_t field, Wire wire) {
  put_varint(out, field << 3 | wire);
}
// `n` bytes of `v`, least significant first.
inline void put_little(std::string& out, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out += static_cast<char>(v >> (8 * i) & 0xff);
}
inline void put_bytes(std::string& out, std::uint32_t field, std::string_view bytes) {
  put_key(out, field, length);
  put_varint(out, bytes.size());
  out += bytes;
}

// Event { double wall_time = 1; int64 step = 2; then one of: string file_version = 3;
// Summary summary = 5; SessionLog session_log = 7 } (`body`: that last field, encoded).
inline std::string event(double wall_time, std::int64_t step, std::string_view body) {
  std::string e;
  put_key(e, 1, fixed64);
  put_little(e, std::bit_cast<std::uint64_t>(wall_time), 8);
  put_key(e, 2, varint);
  put_varint(e, static_cast<std::uint64_t>(step));  // int64: two's complement as a varint
  return e += body;
}

// Summary { repeated Value value = 1 }, Value { string tag = 1; float simple_value = 2 }.
inline std::string summary_field(std::span<const Scalar> values) {
  std::string summary;
  for (const Scalar& s : values) {
    std::string value;
    put_bytes(value, 1, s.tag);
    put_key(value, 2, fixed32);
    put_little(value, std::bit_cast<std::uint32_t>(s.value), 4);
    put_bytes(summary, 1, value);
  }
  std::string field;
  put_bytes(field, 5, summary);
  return field;
}

// SessionLog { SessionStatus status = 1 }, START being 1.
inline std::string session_start_field() {
  std::string log, field;
  put_key(log, 1, varint);
  put_varint(log, 1);
  put_bytes(field, 7, log);
  return field;
}

inline std::uint32_t masked_crc(std::string_view bytes) {
  const std::uint32_t c = crc32c(std::as_bytes(std::span(bytes.data(), bytes.size())));
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

// A record of `data` as TensorFlow's record files frame it.
inline std::string record(std::string_view data) {
  std::string r, length_bytes;
  put_little(length_bytes, data.size(), 8);
  r += length_bytes;
  put_little(r, masked_crc(length_bytes), 4);
  r += data;
  put_little(r, masked_crc(data), 4);
  return r;
}

}  // namespace detail::tfevents

/// A new TensorBoard event file in a folder, written one flushed record at a time: a run
/// killed midway leaves every event written before.
class EventFileWriter {
 public:
  /// Creates `dir` (when missing) and in it events.out.tfevents.<seconds>.<host>, its
  /// seconds the later of now and the newest such file's + 1: TensorBoard reads a folder's
  /// files in name order, so each new file comes after the earlier ones. Its first event is
  /// the file version, "brain.Event:2".
  EventFileWriter(const std::filesystem::path& dir, std::string_view host) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    SEQPAR_CHECK(!ec, dir.string(), ": cannot create the TensorBoard folder: ", ec.message());
    const double now = wall_time();
    long long seconds = static_cast<long long>(now);
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (!name.starts_with(detail::tfevents::file_prefix)) continue;
      const char* first = name.data() + detail::tfevents::file_prefix.size();
      long long s = 0;
      if (std::from_chars(first, name.data() + name.size(), s).ec == std::errc())
        seconds = std::max(seconds, s + 1);
    }
    path_ = dir / (std::string(detail::tfevents::file_prefix) + std::to_string(seconds) + "." +
                   std::string(host));
    f_.open(path_, std::ios::binary | std::ios::app);
    SEQPAR_CHECK(f_.is_open(), path_.string(), ": cannot be created for TensorBoard's events");
    std::string version;
    detail::tfevents::put_bytes(version, 3, "brain.Event:2");
    write(detail::tfevents::event(now, 0, version));
  }

  const std::filesystem::path& path() const { return path_; }

  /// A summary of `values` at `step`.
  void scalars(std::int64_t step, double wall_time, std::span<const Scalar> values) {
    write(detail::tfevents::event(wall_time, step, detail::tfevents::summary_field(values)));
  }

  /// A session that starts at `step`: TensorBoard drops what the folder's earlier files hold
  /// at this step and after (a resumed run does them again).
  void session_start(std::int64_t step, double wall_time) {
    write(detail::tfevents::event(wall_time, step, detail::tfevents::session_start_field()));
  }

  /// Seconds since the epoch, as events record it.
  static double wall_time() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

 private:
  void write(std::string_view event) {
    const std::string r = detail::tfevents::record(event);
    f_.write(r.data(), static_cast<std::streamsize>(r.size()));
    f_.flush();
    SEQPAR_CHECK(!f_.fail(), path_.string(),
                 ": writing TensorBoard's events failed (a full disk?)");
  }

  std::filesystem::path path_;
  std::ofstream f_;
};

}  // namespace seqpar::inline v0
