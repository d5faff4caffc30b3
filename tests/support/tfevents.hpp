// A reader of TensorBoard event files for the tests, written apart from the library's writer
// (io/tensorboard.hpp): its own bitwise CRC-32C and mask, and a protocol-buffer decoder that
// refuses any field an Event, Summary, Value or SessionLog of the writer does not have.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace seqpar::test {

/// One Event as read: every field the writer writes.
struct ReadEvent {
  double wall_time = 0;
  std::int64_t step = 0;
  std::optional<std::string> file_version;
  bool has_summary = false;
  std::vector<std::pair<std::string, float>> values;  // the summary's tags and simple values
  std::optional<std::uint64_t> session_status;        // SessionLog.status (1: START)
};

/// The events of an event file, or what is wrong with it.
struct ReadEvents {
  std::vector<ReadEvent> events;
  std::string error;  // "" when the file reads whole
};

namespace tfevents_detail {

inline std::uint32_t crc32c_bitwise(std::string_view bytes) {
  std::uint32_t c = 0xffffffffu;
  for (const char ch : bytes) {
    c ^= static_cast<unsigned char>(ch);
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1u)));
  }
  return ~c;
}
inline std::uint32_t masked(std::string_view bytes) {
  const std::uint32_t c = crc32c_bitwise(bytes);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}
inline std::uint64_t little(std::string_view b) {
  std::uint64_t v = 0;
  for (std::size_t i = b.size(); i-- > 0;) v = v << 8 | static_cast<unsigned char>(b[i]);
  return v;
}

// The fields of one protocol-buffer message, in order; throws on malformed bytes.
struct Field {
  std::uint32_t number = 0, wire = 0;
  std::uint64_t number_value = 0;  // varint, fixed64, fixed32
  std::string_view bytes;          // length-delimited
};
inline std::uint64_t varint(std::string_view& in) {
  std::uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (in.empty()) throw std::runtime_error("a varint runs past its message");
    const auto b = static_cast<unsigned char>(in.front());
    in.remove_prefix(1);
    v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  throw std::runtime_error("a varint longer than 10 bytes");
}
inline std::vector<Field> fields(std::string_view in) {
  std::vector<Field> out;
  while (!in.empty()) {
    const std::uint64_t key = varint(in);
    Field f;
    f.number = static_cast<std::uint32_t>(key >> 3);
    f.wire = static_cast<std::uint32_t>(key & 7);
    const auto take = [&in](std::size_t n) {
      if (in.size() < n) throw std::runtime_error("a field runs past its message");
      const std::string_view b = in.substr(0, n);
      in.remove_prefix(n);
      return b;
    };
    if (f.wire == 0)
      f.number_value = varint(in);
    else if (f.wire == 1)
      f.number_value = little(take(8));
    else if (f.wire == 5)
      f.number_value = little(take(4));
    else if (f.wire == 2)
      f.bytes = take(varint(in));
    else
      throw std::runtime_error("wire type " + std::to_string(f.wire));
    out.push_back(f);
  }
  return out;
}
inline void expect_wire(const Field& f, std::uint32_t wire, const char* what) {
  if (f.wire != wire) throw std::runtime_error(std::string(what) + " has the wrong wire type");
}

inline ReadEvent event(std::string_view data) {
  ReadEvent e;
  for (const Field& f : fields(data)) {
    switch (f.number) {
      case 1:
        expect_wire(f, 1, "Event.wall_time");
        e.wall_time = std::bit_cast<double>(f.number_value);
        break;
      case 2:
        expect_wire(f, 0, "Event.step");
        e.step = static_cast<std::int64_t>(f.number_value);
        break;
      case 3:
        expect_wire(f, 2, "Event.file_version");
        e.file_version = std::string(f.bytes);
        break;
      case 5:
        expect_wire(f, 2, "Event.summary");
        e.has_summary = true;
        for (const Field& v : fields(f.bytes)) {
          if (v.number != 1) throw std::runtime_error("Summary field " + std::to_string(v.number));
          expect_wire(v, 2, "Summary.value");
          std::pair<std::string, float> tv;
          bool tag = false, value = false;
          for (const Field& x : fields(v.bytes)) {
            if (x.number == 1) {
              expect_wire(x, 2, "Value.tag");
              tv.first = std::string(x.bytes);
              tag = true;
            } else if (x.number == 2) {
              expect_wire(x, 5, "Value.simple_value");
              tv.second = std::bit_cast<float>(static_cast<std::uint32_t>(x.number_value));
              value = true;
            } else {
              throw std::runtime_error("Value field " + std::to_string(x.number));
            }
          }
          if (!tag || !value) throw std::runtime_error("a Value without its tag or value");
          e.values.push_back(tv);
        }
        break;
      case 7:
        expect_wire(f, 2, "Event.session_log");
        for (const Field& x : fields(f.bytes)) {
          if (x.number != 1)
            throw std::runtime_error("SessionLog field " + std::to_string(x.number));
          expect_wire(x, 0, "SessionLog.status");
          e.session_status = x.number_value;
        }
        break;
      default: throw std::runtime_error("Event field " + std::to_string(f.number));
    }
  }
  return e;
}

}  // namespace tfevents_detail

/// Every record of `bytes` (an event file's contents): both CRCs checked, the Event decoded.
inline ReadEvents read_tfevents_bytes(std::string_view bytes) {
  using namespace tfevents_detail;
  ReadEvents r;
  std::size_t at = 0;
  while (at < bytes.size()) {
    const std::string where = "record " + std::to_string(r.events.size() + 1);
    if (bytes.size() - at < 12) return r.error = where + ": truncated header", r;
    const std::string_view length_bytes = bytes.substr(at, 8);
    if (little(bytes.substr(at + 8, 4)) != masked(length_bytes))
      return r.error = where + ": length CRC mismatch", r;
    const std::uint64_t n = little(length_bytes);
    if (bytes.size() - at - 12 < n + 4) return r.error = where + ": truncated data", r;
    const std::string_view data = bytes.substr(at + 12, n);
    if (little(bytes.substr(at + 12 + n, 4)) != masked(data))
      return r.error = where + ": data CRC mismatch", r;
    try {
      r.events.push_back(event(data));
    } catch (const std::exception& e) {
      return r.error = where + ": " + e.what(), r;
    }
    at += 12 + n + 4;
  }
  return r;
}

inline std::string read_file_bytes(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

inline ReadEvents read_tfevents(const std::filesystem::path& p) {
  return read_tfevents_bytes(read_file_bytes(p));
}

/// The event files of `dir` (events.out.tfevents.*) in name order, as TensorBoard reads them.
inline std::vector<std::filesystem::path> tfevents_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().starts_with("events.out.tfevents.")) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace seqpar::test
