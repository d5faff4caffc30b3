#pragma once
// The definitions of io/torch_checkpoint.hpp: in its headers' units, or compiled once
// (core/separate_compilation.hpp).

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "seqpar/core/dtype.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/io/detail/pickle.hpp"
#include "seqpar/io/detail/zip.hpp"
#include "seqpar/io/torch_checkpoint.hpp"

namespace seqpar::inline v0::detail {

// The legacy (pre-zip) torch.save format starts with a pickled magic number.
inline constexpr unsigned char kLegacyTorchMagic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c,
                                                      0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

inline void check_torch_container(std::span<const std::byte> bytes, const std::string& file) {
  auto starts_with = [&](std::span<const unsigned char> prefix) {
    return bytes.size() >= prefix.size() &&
           std::memcmp(bytes.data(), prefix.data(), prefix.size()) == 0;
  };
  SEQPAR_CHECK(!starts_with(kLegacyTorchMagic), file,
               ": written in the legacy PyTorch format (torch.save with "
               "_use_new_zipfile_serialization=False, or torch older than 1.6), which is not "
               "supported; load it with torch and save it again with a current torch "
               "(torch.save(torch.load(path), new_path) writes the zip format)");
  static constexpr unsigned char kPickle2[] = {0x80, 0x02};
  static constexpr unsigned char kPickle4[] = {0x80, 0x04};
  SEQPAR_CHECK(!starts_with(kPickle2) && !starts_with(kPickle4), file,
               ": a bare pickle, not a torch.save zip archive; save the state dict with a current "
               "torch (torch.save writes the zip format by default)");
  SEQPAR_CHECK(!(bytes.size() >= 262 && std::memcmp(bytes.data() + 257, "ustar", 5) == 0), file,
               ": a tar archive (the PyTorch format of versions before 0.4), which is not "
               "supported; load it with torch and save it again with a current torch");
}

inline std::string_view object_kind(const pickle::Object& o) {
  if (std::holds_alternative<std::monostate>(o)) return "None";
  if (std::holds_alternative<bool>(o)) return "bool";
  if (std::holds_alternative<std::int64_t>(o)) return "int";
  if (std::holds_alternative<double>(o)) return "float";
  if (std::holds_alternative<std::string>(o)) return "str";
  if (const auto* s = std::get_if<pickle::Sequence>(&o)) {
    switch (s->kind) {
      case pickle::Sequence::Kind::tuple: return "tuple";
      case pickle::Sequence::Kind::list: return "list";
      case pickle::Sequence::Kind::dict: return "dict";
    }
  }
  if (std::holds_alternative<pickle::Global>(o)) return "global";
  if (std::holds_alternative<pickle::Storage>(o)) return "storage";
  return "tensor";
}

// Products and sums of tensor extents with overflow checks; false on overflow.
inline bool checked_mul(std::int64_t a, std::int64_t b, std::int64_t& out) {
  return !__builtin_mul_overflow(a, b, &out);
}
inline bool checked_add(std::int64_t a, std::int64_t b, std::int64_t& out) {
  return !__builtin_add_overflow(a, b, &out);
}

SEQPAR_DECL TorchIndex index_torch_checkpoint(std::span<const std::byte> bytes,
                                              const std::string& file) {
  check_torch_container(bytes, file);
  const zip::ZipArchive archive(bytes, file);
  SEQPAR_CHECK(!archive.records().empty(), file, ": empty zip archive, not a PyTorch checkpoint");
  const std::string& first = archive.records().front().name;
  const auto slash = first.find('/');
  SEQPAR_CHECK(slash != std::string::npos && slash > 0, file, ": zip record '", first,
               "' is not inside a folder; a torch.save archive keeps its records in one folder");
  const std::string prefix = first.substr(0, slash + 1);

  SEQPAR_CHECK(archive.find(prefix + "constants.pkl") == nullptr, file,
               ": a TorchScript archive (torch.jit.save), not a state dict; save "
               "model.state_dict() with torch.save instead");
  const zip::ZipRecord* pkl = archive.find(prefix + "data.pkl");
  SEQPAR_CHECK(pkl != nullptr, file, ": no '", prefix,
               "data.pkl' record; not a checkpoint written by torch.save");
  if (const zip::ZipRecord* order = archive.find(prefix + "byteorder")) {
    const auto b = archive.contents(*order);
    const std::string_view text(reinterpret_cast<const char*>(b.data()), b.size());
    SEQPAR_CHECK(text == "little", file, ": byte order '", text,
                 "' is not supported; only little-endian checkpoints are read");
  }
  static_assert(std::endian::native == std::endian::little,
                "PyTorch checkpoints are read in place and need a little-endian host");

  const pickle::Result pickled =
      pickle::Machine(archive.contents(*pkl), file + ": " + prefix + "data.pkl").run();
  const auto& objects = pickled.objects;
  const auto* root = std::get_if<pickle::Sequence>(&objects[pickled.root]);
  SEQPAR_CHECK(root != nullptr && root->kind == pickle::Sequence::Kind::dict, file,
               ": data.pkl holds an object of type ", object_kind(objects[pickled.root]),
               ", not a dict of tensors (a state dict)");

  struct StorageData {
    DType dtype;
    std::span<const std::byte> bytes;
  };
  std::map<std::string, StorageData, std::less<>> storages;
  TorchIndex index;

  auto add = [&](std::string name, const pickle::Tensor& t) {
    const auto& st = std::get<pickle::Storage>(objects[t.storage]);
    const std::size_t esize = dtype_size(st.dtype);
    std::int64_t nbytes = 0;
    SEQPAR_CHECK(checked_mul(st.numel, static_cast<std::int64_t>(esize), nbytes), file,
                 ": storage '", st.key, "' of tensor '", name, "' claims ", st.numel,
                 " elements, too many to address");
    auto it = storages.find(st.key);
    if (it == storages.end()) {
      const std::string record = prefix + "data/" + st.key;
      const zip::ZipRecord* rec = archive.find(record);
      SEQPAR_CHECK(rec != nullptr, file, ": tensor '", name, "' needs storage record '", record,
                   "', which the archive does not have");
      SEQPAR_CHECK(static_cast<std::uint64_t>(nbytes) == rec->size, file, ": storage record '",
                   record, "' of tensor '", name, "' has ", rec->size, " bytes; expected ",
                   st.numel, " elements of ", dtype_name(st.dtype));
      it = storages.emplace(st.key, StorageData{st.dtype, archive.contents(*rec)}).first;
    }
    const StorageData& data = it->second;
    SEQPAR_CHECK(data.dtype == st.dtype && data.bytes.size() == static_cast<std::uint64_t>(nbytes),
                 file, ": tensor '", name, "' views storage '", st.key, "' as ", st.numel, " ",
                 dtype_name(st.dtype), " elements, but another tensor views it as ",
                 data.bytes.size() / dtype_size(data.dtype), " ", dtype_name(data.dtype));

    // Largest element offset of the view: offset + sum((size - 1) * stride).
    std::int64_t numel = 1;
    std::int64_t last = t.offset;
    bool ok = t.offset >= 0;
    for (std::size_t d = 0; ok && d < t.shape.size(); ++d) {
      ok = t.shape[d] >= 0 && t.strides[d] >= 0 && checked_mul(numel, t.shape[d], numel);
      std::int64_t reach = 0;
      if (ok && t.shape[d] > 0)
        ok = checked_mul(t.shape[d] - 1, t.strides[d], reach) && checked_add(last, reach, last);
    }
    SEQPAR_CHECK(ok, file, ": tensor '", name,
                 "' has a negative or overflowing size, stride or storage offset");
    SEQPAR_CHECK(t.offset <= st.numel && (numel == 0 || last < st.numel), file, ": tensor '", name,
                 "' (storage offset ", t.offset, ", ", numel, " elements) reaches element ", last,
                 " of storage '", st.key, "', which has ", st.numel, " elements");

    TensorEntry e;
    e.name = std::move(name);
    e.dtype = st.dtype;
    e.shape = t.shape;
    e.strides = t.strides;
    e.bytes = data.bytes.subspan(static_cast<std::size_t>(t.offset) * esize);
    e.file = file;
    const auto [pos, inserted] = index.by_name.emplace(e.name, index.entries.size());
    SEQPAR_CHECK(inserted, file, ": tensor name '", e.name,
                 "' appears twice (a nested dict key joined with '.' repeats a top-level key)");
    index.entries.push_back(std::move(e));
  };

  // Tensors of the top-level dict, and of dicts one level below it, named
  // "outer.inner"; everything else (numbers, strings, lists, deeper dicts) is skipped.
  const auto& items = root->items;
  for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
    const auto* key = std::get_if<std::string>(&objects[items[i]]);
    if (key == nullptr) continue;
    const auto& value = objects[items[i + 1]];
    if (const auto* t = std::get_if<pickle::Tensor>(&value)) {
      add(*key, *t);
    } else if (const auto* inner = std::get_if<pickle::Sequence>(&value);
               inner != nullptr && inner->kind == pickle::Sequence::Kind::dict) {
      for (std::size_t j = 0; j + 1 < inner->items.size(); j += 2) {
        const auto* inner_key = std::get_if<std::string>(&objects[inner->items[j]]);
        const auto* inner_t = std::get_if<pickle::Tensor>(&objects[inner->items[j + 1]]);
        if (inner_key != nullptr && inner_t != nullptr) add(*key + "." + *inner_key, *inner_t);
      }
    }
  }
  return index;
}

}  // namespace seqpar::inline v0::detail
