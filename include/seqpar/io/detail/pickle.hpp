#pragma once
// A restricted pickle machine for the data.pkl of a torch.save checkpoint. It knows
// the opcodes of protocols 2 to 5 that such files use and a short list of globals
// (OrderedDict, the tensor rebuild functions, the torch storage types and dtypes);
// every other opcode or global is refused, so no object other than plain data,
// storages and tensor views is ever built.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "seqpar/core/dtype.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::inline v0::detail::pickle {

/// Index of an object in a Machine's object table.
using Ref = std::size_t;

/// The callables and types data.pkl may name.
enum class GlobalKind : std::uint8_t {
  ordered_dict,
  rebuild_tensor_v2,
  rebuild_parameter,
  rebuild_parameter_with_state,
  storage_type,
  dtype,
};

/// A resolved GLOBAL: what it is, and the dtype of a storage type or torch dtype.
struct Global {
  GlobalKind kind;
  DType dtype = DType::u8;
  std::string name;  // "module.name", for messages
};

/// tuple, list or dict; a dict holds keys and values alternately, in insertion order.
struct Sequence {
  enum class Kind : std::uint8_t { tuple, list, dict } kind;
  std::vector<Ref> items;
};

/// A storage named by a persistent id ('storage', type, key, location, numel).
struct Storage {
  DType dtype;
  std::string key;
  std::int64_t numel;
};

/// A view of a storage built by torch._utils._rebuild_tensor_v2.
struct Tensor {
  Ref storage;  // refers to a Storage
  std::int64_t offset;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
};

/// One object: None, bool, int, float, str, a sequence, a global, a storage or a tensor.
using Object = std::variant<std::monostate, bool, std::int64_t, double, std::string, Sequence,
                            Global, Storage, Tensor>;

/// The objects built from a pickle and the one it returned.
struct Result {
  std::vector<Object> objects;
  Ref root = 0;
};

inline std::string_view opcode_name(std::uint8_t op) {
  switch (op) {
    case '(': return "MARK";
    case '.': return "STOP";
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
    case 'F': return "FLOAT";
    case 'I': return "INT";
    case 'J': return "BININT";
    case 'K': return "BININT1";
    case 'L': return "LONG";
    case 'M': return "BININT2";
    case 'N': return "NONE";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 'R': return "REDUCE";
    case 'S': return "STRING";
    case 'T': return "BINSTRING";
    case 'U': return "SHORT_BINSTRING";
    case 'V': return "UNICODE";
    case 'X': return "BINUNICODE";
    case 'a': return "APPEND";
    case 'b': return "BUILD";
    case 'c': return "GLOBAL";
    case 'd': return "DICT";
    case '}': return "EMPTY_DICT";
    case 'e': return "APPENDS";
    case 'g': return "GET";
    case 'h': return "BINGET";
    case 'i': return "INST";
    case 'j': return "LONG_BINGET";
    case 'l': return "LIST";
    case ']': return "EMPTY_LIST";
    case 'o': return "OBJ";
    case 'p': return "PUT";
    case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT";
    case 's': return "SETITEM";
    case 't': return "TUPLE";
    case ')': return "EMPTY_TUPLE";
    case 'u': return "SETITEMS";
    case 'G': return "BINFLOAT";
    case 0x80: return "PROTO";
    case 0x81: return "NEWOBJ";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";
    case 0x88: return "NEWTRUE";
    case 0x89: return "NEWFALSE";
    case 0x8a: return "LONG1";
    case 0x8b: return "LONG4";
    case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";
    case 0x8c: return "SHORT_BINUNICODE";
    case 0x8d: return "BINUNICODE8";
    case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x92: return "NEWOBJ_EX";
    case 0x93: return "STACK_GLOBAL";
    case 0x94: return "MEMOIZE";
    case 0x95: return "FRAME";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return "unknown opcode";
  }
}

/// The globals data.pkl may name, or nothing.
inline std::optional<Global> resolve_global(std::string_view module, std::string_view name) {
  struct Entry {
    std::string_view module, name;
    GlobalKind kind;
    DType dtype;
  };
  static constexpr Entry kAllowed[] = {
      {"collections", "OrderedDict", GlobalKind::ordered_dict, DType::u8},
      {"torch._utils", "_rebuild_tensor_v2", GlobalKind::rebuild_tensor_v2, DType::u8},
      {"torch._utils", "_rebuild_parameter", GlobalKind::rebuild_parameter, DType::u8},
      {"torch._utils", "_rebuild_parameter_with_state", GlobalKind::rebuild_parameter_with_state,
       DType::u8},
      {"torch", "DoubleStorage", GlobalKind::storage_type, DType::f64},
      {"torch", "FloatStorage", GlobalKind::storage_type, DType::f32},
      {"torch", "HalfStorage", GlobalKind::storage_type, DType::f16},
      {"torch", "BFloat16Storage", GlobalKind::storage_type, DType::bf16},
      {"torch", "LongStorage", GlobalKind::storage_type, DType::i64},
      {"torch", "IntStorage", GlobalKind::storage_type, DType::i32},
      {"torch", "ShortStorage", GlobalKind::storage_type, DType::i16},
      {"torch", "CharStorage", GlobalKind::storage_type, DType::i8},
      {"torch", "ByteStorage", GlobalKind::storage_type, DType::u8},
      {"torch", "BoolStorage", GlobalKind::storage_type, DType::boolean},
      {"torch", "float64", GlobalKind::dtype, DType::f64},
      {"torch", "float32", GlobalKind::dtype, DType::f32},
      {"torch", "float16", GlobalKind::dtype, DType::f16},
      {"torch", "bfloat16", GlobalKind::dtype, DType::bf16},
      {"torch", "int64", GlobalKind::dtype, DType::i64},
      {"torch", "int32", GlobalKind::dtype, DType::i32},
      {"torch", "int16", GlobalKind::dtype, DType::i16},
      {"torch", "int8", GlobalKind::dtype, DType::i8},
      {"torch", "uint8", GlobalKind::dtype, DType::u8},
      {"torch", "bool", GlobalKind::dtype, DType::boolean},
  };
  for (const auto& e : kAllowed)
    if (e.module == module && e.name == name)
      return Global{e.kind, e.dtype, std::string(module) + "." + std::string(name)};
  return std::nullopt;
}

/// Runs a pickle over the allow-listed opcodes and globals. `where` prefixes every
/// error message ("model.bin: data.pkl").
class Machine {
 public:
  Machine(std::span<const std::byte> code, std::string where)
      : code_(code), where_(std::move(where)) {}

  Result run() {
    objects_.clear();
    objects_.reserve(code_.size() / 8 + 8);
    objects_.emplace_back(std::monostate{});  // shared None
    objects_.emplace_back(true);
    objects_.emplace_back(false);
    objects_.emplace_back(Sequence{Sequence::Kind::tuple, {}});  // shared ()
    pos_ = 0;
    for (;;) {
      op_pos_ = pos_;
      const std::uint8_t op = byte();
      switch (op) {
        case 0x80: {  // PROTO
          const std::uint8_t proto = byte();
          check(proto >= 2 && proto <= 5, "pickle protocol ", int{proto}, " is not supported");
          break;
        }
        case 0x95: skip(8); break;  // FRAME: length of the next frame, a hint only
        case '.': {                 // STOP
          check(stack_.size() == 1 && marks_.empty(), "STOP leaves ", stack_.size(),
                " objects and ", marks_.size(), " marks instead of one object");
          return Result{std::move(objects_), stack_.back()};
        }
        case '(': marks_.push_back(stack_.size()); break;
        case '0': pop(); break;
        case '1': stack_.resize(pop_mark()); break;
        case '2': push_ref(top()); break;
        case 'N': push_ref(kNone); break;
        case 0x88: push_ref(kTrue); break;
        case 0x89: push_ref(kFalse); break;
        case ')': push_ref(kEmptyTuple); break;
        case ']': push(Sequence{Sequence::Kind::list, {}}); break;
        case '}': push(Sequence{Sequence::Kind::dict, {}}); break;
        case 'J': push(static_cast<std::int64_t>(static_cast<std::int32_t>(le(4)))); break;
        case 'K': push(static_cast<std::int64_t>(le(1))); break;
        case 'M': push(static_cast<std::int64_t>(le(2))); break;
        case 0x8a: push(long1()); break;
        case 'G': {  // BINFLOAT: big-endian double
          std::uint64_t bits = 0;
          for (int i = 0; i < 8; ++i) bits = (bits << 8) | byte();
          push(std::bit_cast<double>(bits));
          break;
        }
        case 'X': push(std::string(text(le(4)))); break;
        case 0x8c: push(std::string(text(le(1)))); break;
        case 0x8d: push(std::string(text(le(8)))); break;
        case 't': {
          const std::size_t m = pop_mark();
          std::vector<Ref> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
          stack_.resize(m);
          push(Sequence{Sequence::Kind::tuple, std::move(items)});
          break;
        }
        case 0x85:
        case 0x86:
        case 0x87: {  // TUPLE1..3
          const std::size_t n = op - 0x84u;
          check(stack_.size() >= n + floor(), "stack underflow");
          std::vector<Ref> items(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
          stack_.resize(stack_.size() - n);
          push(Sequence{Sequence::Kind::tuple, std::move(items)});
          break;
        }
        case 'l':
        case 'd': {  // LIST, DICT: from the items above the mark
          const std::size_t m = pop_mark();
          std::vector<Ref> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
          stack_.resize(m);
          const bool dict = op == 'd';
          check(!dict || items.size() % 2 == 0, "DICT with an odd number of items");
          push(Sequence{dict ? Sequence::Kind::dict : Sequence::Kind::list, std::move(items)});
          break;
        }
        case 'a': {  // APPEND
          const Ref v = pop();
          sequence(top(), Sequence::Kind::list, "APPEND").items.push_back(v);
          break;
        }
        case 'e': {  // APPENDS
          const std::size_t m = pop_mark();
          std::vector<Ref> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
          stack_.resize(m);
          auto& list = sequence(top(), Sequence::Kind::list, "APPENDS").items;
          list.insert(list.end(), items.begin(), items.end());
          break;
        }
        case 's': {  // SETITEM
          const Ref v = pop();
          const Ref k = pop();
          auto& dict = sequence(top(), Sequence::Kind::dict, "SETITEM").items;
          dict.push_back(k);
          dict.push_back(v);
          break;
        }
        case 'u': {  // SETITEMS
          const std::size_t m = pop_mark();
          check((stack_.size() - m) % 2 == 0, "SETITEMS with an odd number of items");
          std::vector<Ref> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
          stack_.resize(m);
          auto& dict = sequence(top(), Sequence::Kind::dict, "SETITEMS").items;
          dict.insert(dict.end(), items.begin(), items.end());
          break;
        }
        case 'q': memo_[le(1)] = top(); break;
        case 'r': memo_[le(4)] = top(); break;
        case 0x94: memo_[memo_.size()] = top(); break;
        case 'h': push_ref(memo_get(le(1))); break;
        case 'j': push_ref(memo_get(le(4))); break;
        case 'c': {  // GLOBAL "module\nname\n"
          const std::string_view module = line();
          const std::string_view name = line();
          push_global(module, name);
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          const Ref name = pop();
          const Ref module = pop();
          const auto* m = std::get_if<std::string>(&objects_[module]);
          const auto* n = std::get_if<std::string>(&objects_[name]);
          check(m != nullptr && n != nullptr, "STACK_GLOBAL needs two strings");
          push_global(*m, *n);
          break;
        }
        case 'Q': persistent_load(); break;
        case 'R': reduce(); break;
        case 'b': {  // BUILD: only the attribute dict of an OrderedDict (its _metadata)
          pop();
          const auto* s = std::get_if<Sequence>(&objects_[top()]);
          check(s != nullptr && s->kind == Sequence::Kind::dict,
                "BUILD applies state to an object other than a dict");
          break;
        }
        default:
          fail(where_, ": opcode 0x", hex(op), " (", opcode_name(op), ") at byte ", op_pos_,
               " is not allowed in a PyTorch checkpoint; only tensors, storages and plain data "
               "are read");
      }
    }
  }

 private:
  static constexpr Ref kNone = 0, kTrue = 1, kFalse = 2, kEmptyTuple = 3;

  template <class... Parts>
  void check(bool cond, Parts&&... parts) const {
    if (!cond)
      fail(where_, ": ", std::forward<Parts>(parts)..., " (", opcode_name(code_op()), " at byte ",
           op_pos_, ")");
  }

  std::uint8_t code_op() const {
    return op_pos_ < code_.size() ? static_cast<std::uint8_t>(code_[op_pos_]) : 0;
  }

  static std::string hex(std::uint8_t v) {
    const char* digits = "0123456789abcdef";
    return {digits[v >> 4], digits[v & 15]};
  }

  std::uint8_t byte() {
    if (pos_ >= code_.size())
      fail(where_, ": truncated pickle (ends at byte ", code_.size(), " without STOP)");
    return static_cast<std::uint8_t>(code_[pos_++]);
  }

  void skip(std::uint64_t n) {
    if (n > code_.size() - pos_)
      fail(where_, ": truncated pickle (", opcode_name(code_op()), " at byte ", op_pos_, " needs ",
           n, " more bytes)");
    pos_ += static_cast<std::size_t>(n);
  }

  std::uint64_t le(int n) {
    skip(static_cast<std::uint64_t>(n));
    std::uint64_t v = 0;
    for (int i = n; i-- > 0;) v = (v << 8) | static_cast<std::uint8_t>(code_[pos_ - n + i]);
    return v;
  }

  std::string_view text(std::uint64_t n) {
    const std::size_t start = pos_;
    skip(n);
    return {reinterpret_cast<const char*>(code_.data()) + start, static_cast<std::size_t>(n)};
  }

  std::string_view line() {
    const std::size_t start = pos_;
    while (byte() != '\n') {
    }
    return {reinterpret_cast<const char*>(code_.data()) + start, pos_ - 1 - start};
  }

  std::int64_t long1() {
    const auto n = static_cast<int>(le(1));
    check(n <= 8, "integer of ", n, " bytes does not fit in 64 bits");
    if (n == 0) return 0;
    std::uint64_t v = le(n);
    if (n < 8 && (v >> (8 * n - 1)) != 0) v |= ~std::uint64_t{0} << (8 * n);  // sign-extend
    return static_cast<std::int64_t>(v);
  }

  template <class T>
  void push(T&& value) {
    objects_.emplace_back(std::forward<T>(value));
    stack_.push_back(objects_.size() - 1);
  }
  void push_ref(Ref r) { stack_.push_back(r); }

  // Objects below the innermost mark belong to an enclosing construct.
  std::size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }

  Ref top() const {
    check(stack_.size() > floor(), "stack underflow");
    return stack_.back();
  }
  Ref pop() {
    const Ref r = top();
    stack_.pop_back();
    return r;
  }
  std::size_t pop_mark() {
    check(!marks_.empty(), "no MARK on the stack");
    const std::size_t m = marks_.back();
    marks_.pop_back();
    return m;
  }

  Ref memo_get(std::uint64_t key) const {
    auto it = memo_.find(key);
    check(it != memo_.end(), "memo entry ", key, " was never stored");
    return it->second;
  }

  Sequence& sequence(Ref r, Sequence::Kind kind, std::string_view op) {
    auto* s = std::get_if<Sequence>(&objects_[r]);
    check(s != nullptr && s->kind == kind, op, " applied to an object of the wrong type");
    return *s;
  }

  std::int64_t integer(Ref r, std::string_view what) const {
    const auto* v = std::get_if<std::int64_t>(&objects_[r]);
    check(v != nullptr, what, " is not an integer");
    return *v;
  }

  std::vector<std::int64_t> integers(Ref r, std::string_view what) const {
    const auto* s = std::get_if<Sequence>(&objects_[r]);
    check(s != nullptr && s->kind == Sequence::Kind::tuple, what, " is not a tuple");
    std::vector<std::int64_t> out;
    out.reserve(s->items.size());
    for (Ref i : s->items) out.push_back(integer(i, what));
    return out;
  }

  void push_global(std::string_view module, std::string_view name) {
    auto g = resolve_global(module, name);
    // torch saves the dtypes outside DType (float8, complex, uint16, ...) through other
    // storage types or through _rebuild_tensor_v3 with an untyped storage.
    const bool other_dtype = (module == "torch" && name.ends_with("Storage")) ||
                             (module == "torch.storage" && name == "UntypedStorage") ||
                             (module == "torch._utils" && name == "_rebuild_tensor_v3");
    if (!g && other_dtype)
      fail(where_, ": '", module, ".", name, "' at byte ", op_pos_,
           " stores a tensor of a dtype that is not supported; tensors must be float16, "
           "bfloat16, float32, float64, int64, int32, int16, int8, uint8 or bool");
    if (!g)
      fail(where_, ": global '", module, ".", name, "' at byte ", op_pos_,
           " is not allowed; a PyTorch state dict only names OrderedDict, the tensor rebuild "
           "functions and the torch storage types, and no other object is ever built");
    push(std::move(*g));
  }

  // ('storage', storage type, key, location, numel)
  void persistent_load() {
    const Ref pid = pop();
    const auto* s = std::get_if<Sequence>(&objects_[pid]);
    check(s != nullptr && s->kind == Sequence::Kind::tuple && s->items.size() == 5,
          "persistent id is not a 5-tuple ('storage', type, key, location, size)");
    const auto* tag = std::get_if<std::string>(&objects_[s->items[0]]);
    check(tag != nullptr && *tag == "storage", "persistent id is not a storage");
    const auto* type = std::get_if<Global>(&objects_[s->items[1]]);
    check(type != nullptr && type->kind == GlobalKind::storage_type,
          "persistent id does not name a torch storage type");
    const auto* key = std::get_if<std::string>(&objects_[s->items[2]]);
    check(key != nullptr, "storage key is not a string");
    const std::int64_t numel = integer(s->items[4], "storage size");
    check(numel >= 0, "storage size ", numel, " is negative");
    push(Storage{type->dtype, *key, numel});
  }

  void reduce() {
    const Ref args_ref = pop();
    const Ref fn_ref = pop();
    const auto* fn = std::get_if<Global>(&objects_[fn_ref]);
    check(fn != nullptr, "REDUCE of an object that is not an allowed callable");
    const auto* args_seq = std::get_if<Sequence>(&objects_[args_ref]);
    check(args_seq != nullptr && args_seq->kind == Sequence::Kind::tuple,
          "REDUCE arguments are not a tuple");
    const std::vector<Ref> args = args_seq->items;
    switch (fn->kind) {
      case GlobalKind::ordered_dict:
        check(args.empty(), "collections.OrderedDict called with arguments");
        push(Sequence{Sequence::Kind::dict, {}});
        return;
      case GlobalKind::rebuild_tensor_v2: {
        // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
        check(args.size() == 6 || args.size() == 7, "_rebuild_tensor_v2 called with ", args.size(),
              " arguments; expected 6 or 7");
        check(std::holds_alternative<Storage>(objects_[args[0]]),
              "_rebuild_tensor_v2 called without a storage");
        Tensor t{args[0], integer(args[1], "storage offset"), integers(args[2], "tensor size"),
                 integers(args[3], "tensor stride")};
        check(t.shape.size() == t.strides.size(), "tensor size has ", t.shape.size(),
              " dimensions but its stride has ", t.strides.size());
        push(std::move(t));
        return;
      }
      case GlobalKind::rebuild_parameter:
      case GlobalKind::rebuild_parameter_with_state: {
        // (data, requires_grad, backward_hooks[, state]): the parameter is its data.
        const std::size_t expected = fn->kind == GlobalKind::rebuild_parameter ? 3 : 4;
        check(args.size() == expected, fn->name, " called with ", args.size(),
              " arguments; expected ", expected);
        check(std::holds_alternative<Tensor>(objects_[args[0]]), fn->name,
              " called without a tensor");
        push_ref(args[0]);
        return;
      }
      case GlobalKind::storage_type:
      case GlobalKind::dtype: break;
    }
    fail(where_, ": REDUCE calls '", fn->name, "' at byte ", op_pos_,
         ", which is not allowed; only OrderedDict and the tensor rebuild functions may be called");
  }

  std::span<const std::byte> code_;
  std::string where_;
  std::size_t pos_ = 0;
  std::size_t op_pos_ = 0;
  std::vector<Object> objects_;
  std::vector<Ref> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint64_t, Ref> memo_;
};

}  // namespace seqpar::inline v0::detail::pickle
