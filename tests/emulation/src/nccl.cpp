// The emulated NCCL (nccl.h): communicators, queued collectives and point-to-point calls,
// groups, split, abort; ranks that are threads of this process meet here, ranks in other
// processes through MPI (nccl_mpi.cpp).
//
// In process, an operation runs when its stream reaches it and every peer has queued its part:
// the peers' streams are run up to their parts, then the data of all of them moves at once. A
// send and its receive meet the same way, so two ranks that both send before they receive,
// outside a group, wait for each other for ever: the emulation reports that cycle.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>

#include "nccl_internal.hpp"

namespace seqpar::emu::nccl {

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::all_reduce: return "ncclAllReduce";
    case Kind::reduce_scatter: return "ncclReduceScatter";
    case Kind::all_gather: return "ncclAllGather";
    case Kind::broadcast: return "ncclBroadcast";
    case Kind::send: return "ncclSend";
    case Kind::recv: return "ncclRecv";
  }
  return "an NCCL call";
}

std::size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
  }
  return 0;
}

std::string Part::describe() const {
  std::string s = std::string(kind_name(kind)) + " of rank " + std::to_string(rank) + " of " +
                  (comm ? comm->group->name() : std::string("a communicator")) + ", " +
                  std::to_string(count) + " elements";
  if (kind == Kind::send) s += " to rank " + std::to_string(peer);
  if (kind == Kind::recv) s += " from rank " + std::to_string(peer);
  if (kind == Kind::broadcast) s += " from root " + std::to_string(root);
  return s + " (" + site + ")";
}

std::size_t Part::send_bytes(int n) const {
  const std::size_t e = type_size(type);
  switch (kind) {
    case Kind::all_reduce:
    case Kind::all_gather:
    case Kind::send: return count * e;
    case Kind::reduce_scatter: return count * static_cast<std::size_t>(n) * e;
    case Kind::broadcast: return rank == root ? count * e : 0;
    case Kind::recv: return 0;
  }
  return 0;
}

std::size_t Part::recv_bytes(int n) const {
  const std::size_t e = type_size(type);
  switch (kind) {
    case Kind::all_reduce:
    case Kind::reduce_scatter:
    case Kind::broadcast:
    case Kind::recv: return count * e;
    case Kind::all_gather: return count * static_cast<std::size_t>(n) * e;
    case Kind::send: return 0;
  }
  return 0;
}

std::string QueuedOp::describe() const {
  std::string s = parts.size() > 1 ? "an NCCL group: " : "";
  for (std::size_t i = 0; i < parts.size(); ++i) s += (i ? "; " : "") + parts[i].describe();
  return s + (done ? " (done)" : "");
}

CommOp::Result QueuedOp::advance() { return parts.front().comm->group->transport->advance(*this); }

namespace {

template <class T, class A>
void reduce_typed(const std::vector<const unsigned char*>& in, unsigned char* out, std::size_t n,
                  ncclRedOp_t op) {
  const auto at = [](const unsigned char* p, std::size_t i) {
    T x;
    std::memcpy(&x, p + i * sizeof(T), sizeof(T));
    return static_cast<A>(x);
  };
  for (std::size_t i = 0; i < n; ++i) {
    A a = at(in[0], i);
    for (std::size_t r = 1; r < in.size(); ++r) {
      const A b = at(in[r], i);
      switch (op) {
        case ncclSum:
        case ncclAvg: a = a + b; break;
        case ncclProd: a = a * b; break;
        case ncclMax: a = b > a ? b : a; break;
        case ncclMin: a = b < a ? b : a; break;
      }
    }
    if (op == ncclAvg) a = a / static_cast<A>(in.size());
    const T t = static_cast<T>(a);
    std::memcpy(out + i * sizeof(T), &t, sizeof(T));
  }
}

}  // namespace

void reduce_into(const std::vector<const unsigned char*>& in, unsigned char* out, std::size_t n,
                 ncclDataType_t type, ncclRedOp_t op) {
  switch (type) {
    case ncclInt8: reduce_typed<std::int8_t, std::int64_t>(in, out, n, op); break;
    case ncclUint8: reduce_typed<std::uint8_t, std::uint64_t>(in, out, n, op); break;
    case ncclInt32: reduce_typed<std::int32_t, std::int64_t>(in, out, n, op); break;
    case ncclUint32: reduce_typed<std::uint32_t, std::uint64_t>(in, out, n, op); break;
    case ncclInt64: reduce_typed<std::int64_t, std::int64_t>(in, out, n, op); break;
    case ncclUint64: reduce_typed<std::uint64_t, std::uint64_t>(in, out, n, op); break;
    case ncclFloat32: reduce_typed<float, float>(in, out, n, op); break;
    case ncclFloat64: reduce_typed<double, double>(in, out, n, op); break;
    // 16-bit values are summed in float, in rank order, and rounded once.
    case ncclFloat16: reduce_typed<__half, float>(in, out, n, op); break;
    case ncclBfloat16: reduce_typed<__nv_bfloat16, float>(in, out, n, op); break;
  }
}

std::string mismatch(const std::vector<const Part*>& parts) {
  const Part& a = *parts.front();
  for (const Part* b : parts) {
    if (b->kind != a.kind || b->count != a.count || b->type != a.type ||
        (a.kind != Kind::all_gather && a.kind != Kind::broadcast && b->op != a.op) ||
        (a.kind == Kind::broadcast && b->root != a.root))
      return b->describe() + " does not match " + a.describe() + " (collective #" +
             std::to_string(a.seq) + " of the communicator: every rank must make the same call)";
  }
  return "";
}

bool part_views(const Part& p, int n, const unsigned char*& send, unsigned char*& recv) {
  const int device = p.owner->device;
  send = nullptr;
  recv = nullptr;
  const auto view = [&](const void* ptr, std::size_t bytes, const char* role) -> void* {
    if (bytes == 0) return nullptr;
    const Allocation* x = find_allocation(ptr, bytes);
    if (!x || x->device != device) {
      fail_device(device, cudaErrorIllegalAddress,
                  p.describe() + ": " + role + " [" + describe_address(ptr) + ", +" +
                      std::to_string(bytes) +
                      " bytes) is not inside one live allocation of device " +
                      std::to_string(device));
      return nullptr;
    }
    return to_emu(ptr);
  };
  const std::size_t sb = p.send_bytes(n), rb = p.recv_bytes(n);
  send = static_cast<const unsigned char*>(view(p.send, sb, "sendbuff"));
  if (sb && !send) return false;
  recv = static_cast<unsigned char*>(view(p.recv, rb, "recvbuff"));
  return !(rb && !recv);
}

namespace {

// ---- ranks that are threads of this process ----------------------------------------------

struct SplitRound {
  std::map<int, std::pair<int, int>> entries;  // rank -> (color, key)
  std::map<int, std::shared_ptr<ncclComm>> results;
  std::map<int, int> devices;
  int taken = 0;
  bool made = false;
};

std::uint64_t next_group_number = 1;  // guarded by the machine lock

class InProcess final : public Transport {
 public:
  explicit InProcess(Group& g) : group_(g) {}

  void queued(Part& p) override {
    if (p.kind == Kind::send)
      p2p_[{p.rank, p.peer, p.seq}].first = &p;
    else if (p.kind == Kind::recv)
      p2p_[{p.peer, p.rank, p.seq}].second = &p;
    else {
      auto& v = collectives_[p.seq];
      v.resize(static_cast<std::size_t>(group_.size));
      v[static_cast<std::size_t>(p.rank)] = &p;
    }
  }

  void broken(Group&) override { machine().progress.notify_all(); }

  CommOp::Result advance(QueuedOp& x) override {
    // Every operation that must run together with x: its peers' parts, theirs, and so on.
    std::vector<QueuedOp*> set{&x};
    for (std::size_t i = 0; i < set.size(); ++i) {
      for (Part& p : set[i]->parts) {
        Group& g = *p.comm->group;
        if (g.broken) continue;
        auto* t = static_cast<InProcess*>(g.transport.get());
        std::vector<Part*> peers;
        if (p.kind == Kind::send || p.kind == Kind::recv) {
          const auto key = p.kind == Kind::send ? std::tuple{p.rank, p.peer, p.seq}
                                                : std::tuple{p.peer, p.rank, p.seq};
          auto it = t->p2p_.find(key);
          Part* other = it == t->p2p_.end()    ? nullptr
                        : p.kind == Kind::send ? it->second.second
                                               : it->second.first;
          if (!other) return CommOp::Result::blocked;
          peers.push_back(other);
        } else {
          auto it = t->collectives_.find(p.seq);
          if (it == t->collectives_.end()) return CommOp::Result::blocked;
          for (Part* q : it->second) {
            if (!q) return CommOp::Result::blocked;
            peers.push_back(q);
          }
        }
        for (Part* q : peers)
          if (std::find(set.begin(), set.end(), q->owner) == set.end()) set.push_back(q->owner);
      }
    }
    // The peers' streams run up to their parts; a part needed to get there is a cycle.
    for (QueuedOp* y : set)
      if (y != &x && y->joining)
        fatal("deadlock: " + y->describe() + " is needed to complete the work before it");
    struct Joining {
      std::vector<QueuedOp*>& s;
      ~Joining() {
        for (QueuedOp* y : s) y->joining = false;
      }
    } joining{set};
    for (QueuedOp* y : set) y->joining = true;
    for (QueuedOp* y : set) {
      if (y == &x || y->done) continue;
      if (seqpar::emu::advance(*y->stream, y->stream_seq - 1) == Progress::blocked)
        return CommOp::Result::blocked;
    }
    run(set);
    for (QueuedOp* y : set) y->done = true;
    note_progress();
    machine().progress.notify_all();
    return CommOp::Result::done;
  }

  std::shared_ptr<ncclComm> split(ncclComm& comm, int color, int key, Lock& lock,
                                  const std::string& at) override {
    const std::uint64_t number = ++comm.splits;
    SplitRound& round = splits_[number];
    round.entries[comm.rank] = {color, key};
    round.devices[comm.rank] = comm.device;
    machine().progress.notify_all();
    wait_for(
        lock,
        [&] {
          return round.entries.size() == static_cast<std::size_t>(group_.size) || group_.broken
                     ? Progress::done
                     : Progress::blocked;
        },
        at + " (every rank of " + group_.name() + " must call ncclCommSplit)");
    if (!round.made) {
      round.made = true;
      std::map<int, std::vector<std::pair<int, int>>> by_color;  // color -> (key, rank)
      for (const auto& [r, ck] : round.entries)
        if (ck.first != NCCL_SPLIT_NOCOLOR) by_color[ck.first].push_back({ck.second, r});
      for (auto& [c, members] : by_color) {
        std::sort(members.begin(), members.end());
        auto g = std::make_shared<Group>();
        g->size = static_cast<int>(members.size());
        g->number = next_group_number++;
        g->transport = std::make_unique<InProcess>(*g);
        for (std::size_t i = 0; i < members.size(); ++i) {
          auto child = std::make_shared<ncclComm>();
          child->group = g;
          child->rank = static_cast<int>(i);
          child->device = round.devices[members[i].second];
          round.results[members[i].second] = child;
        }
      }
    }
    std::shared_ptr<ncclComm> mine = round.results[comm.rank];
    if (++round.taken == group_.size) splits_.erase(number);
    return mine;
  }

 private:
  // Moves the data of every part of the set, then forgets the parts.
  void run(const std::vector<QueuedOp*>& set) {
    for (QueuedOp* y : set) {
      for (Part& p : y->parts) {
        Group& g = *p.comm->group;
        if (g.broken) {
          if (!p.comm->aborted) p.comm->async_error = ncclRemoteError;
          continue;
        }
        auto* t = static_cast<InProcess*>(g.transport.get());
        if (p.kind == Kind::recv) continue;  // moved with its send
        if (p.kind == Kind::send) {
          auto it = t->p2p_.find({p.rank, p.peer, p.seq});
          Part& r = *it->second.second;
          if (r.count != p.count || r.type != p.type)
            fatal(p.describe() + " is received by " + r.describe() +
                  ": a send and its receive must have the same count and type");
          const unsigned char *s = nullptr, *unused = nullptr;
          unsigned char *d = nullptr, *none = nullptr;
          if (part_views(p, g.size, s, none) && part_views(r, g.size, unused, d))
            std::memmove(d, s, p.send_bytes(g.size));
          t->p2p_.erase(it);
          continue;
        }
        auto it = t->collectives_.find(p.seq);
        if (it == t->collectives_.end()) continue;  // moved with an earlier rank's part
        std::vector<const Part*> parts(it->second.begin(), it->second.end());
        if (const std::string bad = mismatch(parts); !bad.empty()) fatal(bad);
        collective(parts, g.size);
        t->collectives_.erase(it);
      }
    }
  }

  static void collective(const std::vector<const Part*>& parts, int n) {
    std::vector<const unsigned char*> send(parts.size());
    std::vector<unsigned char*> recv(parts.size());
    for (std::size_t r = 0; r < parts.size(); ++r) {
      const unsigned char* s = nullptr;
      unsigned char* d = nullptr;
      if (!part_views(*parts[r], n, s, d)) return;
      send[r] = s;
      recv[r] = d;
    }
    const Part& a = *parts.front();
    const std::size_t e = type_size(a.type), block = a.count * e;
    std::vector<std::vector<unsigned char>> out(parts.size());
    switch (a.kind) {
      case Kind::all_reduce: {
        out[0].resize(block);
        reduce_into(send, out[0].data(), a.count, a.type, a.op);
        for (std::size_t r = 1; r < parts.size(); ++r) out[r] = out[0];
        break;
      }
      case Kind::reduce_scatter:
        for (std::size_t r = 0; r < parts.size(); ++r) {
          std::vector<const unsigned char*> in(parts.size());
          for (std::size_t q = 0; q < parts.size(); ++q) in[q] = send[q] + r * block;
          out[r].resize(block);
          reduce_into(in, out[r].data(), a.count, a.type, a.op);
        }
        break;
      case Kind::all_gather:
        out[0].resize(block * parts.size());
        for (std::size_t q = 0; q < parts.size(); ++q)
          std::memcpy(out[0].data() + q * block, send[q], block);
        for (std::size_t r = 1; r < parts.size(); ++r) out[r] = out[0];
        break;
      case Kind::broadcast:
        out[0].assign(send[static_cast<std::size_t>(a.root)],
                      send[static_cast<std::size_t>(a.root)] + block);
        for (std::size_t r = 1; r < parts.size(); ++r) out[r] = out[0];
        break;
      default: break;
    }
    for (std::size_t r = 0; r < parts.size(); ++r)
      std::memcpy(recv[r], out[r].data(), out[r].size());
  }

  Group& group_;
  std::map<std::uint64_t, std::vector<Part*>> collectives_;
  std::map<std::tuple<int, int, std::uint64_t>, std::pair<Part*, Part*>> p2p_;
  std::map<std::uint64_t, SplitRound> splits_;
};

// ---- the unique id and ncclCommInitRank's meeting in process --------------------------------

struct IdContents {
  char magic[16];
  std::int64_t pid;
  std::uint64_t host;
  std::uint64_t nonce;
  std::int32_t creator_world_rank;
};
static_assert(sizeof(IdContents) <= NCCL_UNIQUE_ID_BYTES);

std::uint64_t host_hash() {
  char name[256] = {};
  (void)gethostname(name, sizeof name - 1);
  return std::hash<std::string>{}(name);
}

struct Meeting {
  std::shared_ptr<Group> group;
  std::map<int, std::shared_ptr<ncclComm>> ranks;
  std::set<int> devices;
  int left = 0;  // ranks that have returned
};

struct Registry {
  std::map<std::string, Meeting> meetings;  // by unique id
  std::map<const void*, std::shared_ptr<ncclComm>> handles;
};
Registry& registry() {
  static auto* r = new Registry;  // guarded by the machine lock; never destroyed
  return *r;
}

std::shared_ptr<ncclComm> comm_of(ncclComm_t c) {
  auto it = registry().handles.find(c);
  return it == registry().handles.end() ? nullptr : it->second;
}

ncclComm_t publish(const std::shared_ptr<ncclComm>& c) {
  registry().handles.emplace(c.get(), c);
  return c.get();
}

ncclResult_t refuse(ncclResult_t r, const std::string& detail) {
  std::fprintf(stderr, "seqpar emulated CUDA: NCCL: %s: %s\n", ncclGetErrorString(r),
               detail.c_str());
  return r;
}

// ---- queueing -----------------------------------------------------------------------------

struct Pending {
  Part part;
  std::shared_ptr<Stream> stream;
};
struct GroupCalls {
  int depth = 0;
  std::vector<Pending> pending;
};
GroupCalls& group_calls() {
  thread_local GroupCalls* g = nullptr;  // leaked: calls may come from destructors at thread end
  if (!g) g = new GroupCalls;
  return *g;
}

void queue(std::vector<Part> parts, const std::shared_ptr<Stream>& s) {
  auto op = std::make_shared<QueuedOp>();
  op->parts = std::move(parts);
  op->device = s->device;
  op->stream = s;
  Op queued;
  queued.kind = Op::Kind::comm;
  queued.comm = op;
  queued.what = op->describe();
  enqueue(s, std::move(queued));
  op->stream_seq = s->enqueued;
  for (Part& p : op->parts) {
    p.owner = op.get();
    p.comm->group->transport->queued(p);
  }
}

ncclResult_t call(Part p, ncclComm_t handle, cudaStream_t stream, const seqpar_emu_site& site) {
  Lock lock(machine().mutex);
  p.site = site_text(site);
  const std::string at = std::string(kind_name(p.kind)) + " at " + p.site;
  p.comm = comm_of(handle);
  if (!p.comm) return refuse(ncclInvalidArgument, at + ": not a live communicator");
  ncclComm& c = *p.comm;
  p.rank = c.rank;
  if (type_size(p.type) == 0) return refuse(ncclInvalidArgument, at + ": an unknown data type");
  if (p.kind == Kind::broadcast && (p.root < 0 || p.root >= c.group->size))
    return refuse(ncclInvalidArgument, at + ": root " + std::to_string(p.root));
  if ((p.kind == Kind::send || p.kind == Kind::recv) && (p.peer < 0 || p.peer >= c.group->size))
    return refuse(ncclInvalidArgument, at + ": peer " + std::to_string(p.peer));
  const std::shared_ptr<Stream> s = stream_of(stream);
  if (!s) return refuse(ncclInvalidArgument, at + ": not a live stream");
  if (s->device != c.device)
    return refuse(ncclInvalidUsage, at + ": " + s->name() + " for rank " + std::to_string(c.rank) +
                                        " of " + c.group->name() + ", which is on device " +
                                        std::to_string(c.device));
  if (p.kind == Kind::send)
    p.seq = ++c.sends[p.peer];
  else if (p.kind == Kind::recv)
    p.seq = ++c.recvs[p.peer];
  else
    p.seq = ++c.collectives;
  GroupCalls& g = group_calls();
  if (g.depth > 0) {
    g.pending.push_back({std::move(p), s});
    return ncclSuccess;
  }
  queue({std::move(p)}, s);
  return ncclSuccess;
}

}  // namespace

std::string pending_nccl_on(int device) {
  for (const auto& s : machine().devices[static_cast<std::size_t>(device)].streams)
    for (const Op& op : s->ops)
      if (op.kind == Op::Kind::comm && !op.comm->done) return op.comm->describe();
  return "";
}

}  // namespace seqpar::emu::nccl

namespace seqpar::emu {
std::string pending_nccl_on(int device) { return nccl::pending_nccl_on(device); }
}  // namespace seqpar::emu

// ---- the API ---------------------------------------------------------------------------------

using namespace seqpar::emu;
using namespace seqpar::emu::nccl;

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  Lock lock(machine().mutex);
  std::memset(id, 0, sizeof *id);
  IdContents c{};
  std::memcpy(c.magic, "seqpar-emu-nccl", 16);
  c.pid = static_cast<std::int64_t>(getpid());
  c.host = host_hash();
  static std::mt19937_64 rng(std::random_device{}());
  c.nonce = rng();
  c.creator_world_rank = mpi_world_rank();
  std::memcpy(id->internal, &c, sizeof c);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                              seqpar_emu_site site) {
  Lock lock(machine().mutex);
  *comm = nullptr;
  const std::string at = "ncclCommInitRank at " + site_text(site);
  IdContents c{};
  std::memcpy(&c, id.internal, sizeof c);
  if (std::memcmp(c.magic, "seqpar-emu-nccl", 16) != 0)
    return refuse(ncclInvalidArgument, at + ": not an id from ncclGetUniqueId");
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return refuse(ncclInvalidArgument,
                  at + ": rank " + std::to_string(rank) + " of " + std::to_string(nranks));
  const int device = current_device();
  // An id made in another process, or in this one while MPI runs several processes (ranks
  // under mpirun, the creator's included), is met over MPI; otherwise the ranks are threads
  // of this process.
  const bool over_mpi = c.pid != static_cast<std::int64_t>(getpid()) || c.host != host_hash() ||
                        (nranks > 1 && c.creator_world_rank >= 0 && mpi_world_size() > 1);
  if (over_mpi) {
    auto g = std::make_shared<Group>();
    g->size = nranks;
    g->number = next_group_number++;
    std::string error;
    lock.unlock();  // MPI waits for the other processes
    std::unique_ptr<Transport> t = mpi_transport(*g, rank, id, device, error);
    lock.lock();
    if (!t) return refuse(ncclInvalidUsage, at + ": " + error);
    g->transport = std::move(t);
    auto mine = std::make_shared<ncclComm>();
    mine->group = g;
    mine->rank = rank;
    mine->device = device;
    *comm = publish(mine);
    return ncclSuccess;
  }
  const std::string key(id.internal, sizeof c);
  Meeting& m = registry().meetings[key];
  if (!m.group) {
    m.group = std::make_shared<Group>();
    m.group->size = nranks;
    m.group->number = next_group_number++;
    m.group->transport = std::make_unique<InProcess>(*m.group);
  }
  if (m.group->size != nranks)
    return refuse(ncclInvalidArgument, at + ": " + std::to_string(nranks) +
                                           " ranks, but another rank said " +
                                           std::to_string(m.group->size));
  if (m.ranks.count(rank))
    return refuse(ncclInvalidArgument, at + ": rank " + std::to_string(rank) + " joined twice");
  if (m.devices.count(device))
    return refuse(ncclInvalidUsage, at + ": rank " + std::to_string(rank) + " is on device " +
                                        std::to_string(device) +
                                        ", as another rank of the communicator: NCCL refuses two "
                                        "ranks on one GPU");
  auto mine = std::make_shared<ncclComm>();
  mine->group = m.group;
  mine->rank = rank;
  mine->device = device;
  m.ranks[rank] = mine;
  m.devices.insert(device);
  machine().progress.notify_all();
  wait_for(
      lock,
      [&] {
        return m.ranks.size() == static_cast<std::size_t>(nranks) ? Progress::done
                                                                  : Progress::blocked;
      },
      at + " (waiting for the other ranks of the communicator)");
  if (++m.left == nranks) registry().meetings.erase(key);
  *comm = publish(mine);
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t*,
                           seqpar_emu_site site) {
  Lock lock(machine().mutex);
  *newcomm = nullptr;
  const std::string at = "ncclCommSplit at " + site_text(site);
  const std::shared_ptr<ncclComm> c = comm_of(comm);
  if (!c) return refuse(ncclInvalidArgument, at + ": not a live communicator");
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
    return refuse(ncclInvalidArgument, at + ": color " + std::to_string(color));
  std::shared_ptr<ncclComm> child = c->group->transport->split(*c, color, key, lock, at);
  if (child) {
    child->device = c->device;
    *newcomm = publish(child);
  }
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm, seqpar_emu_site site) {
  Lock lock(machine().mutex);
  if (registry().handles.erase(comm) != 1)
    return refuse(ncclInvalidArgument,
                  "ncclCommDestroy at " + site_text(site) + ": not a live communicator");
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm, seqpar_emu_site site) {
  Lock lock(machine().mutex);
  const std::shared_ptr<ncclComm> c = comm_of(comm);
  if (!c)
    return refuse(ncclInvalidArgument,
                  "ncclCommAbort at " + site_text(site) + ": not a live communicator");
  c->aborted = true;
  Group& g = *c->group;
  if (!g.broken) {
    g.broken = true;
    g.broken_why = "rank " + std::to_string(c->rank) + " aborted it (" + site_text(site) + ")";
    g.transport->broken(g);
  }
  registry().handles.erase(comm);
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  Lock lock(machine().mutex);
  const std::shared_ptr<ncclComm> c = comm_of(comm);
  if (!c) return ncclInvalidArgument;
  *asyncError = c->async_error != ncclSuccess ? c->async_error
                : c->group->broken            ? ncclRemoteError
                                              : ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  Lock lock(machine().mutex);
  const std::shared_ptr<ncclComm> c = comm_of(comm);
  if (!c) return ncclInvalidArgument;
  *count = c->group->size;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  Lock lock(machine().mutex);
  const std::shared_ptr<ncclComm> c = comm_of(comm);
  if (!c) return ncclInvalidArgument;
  *rank = c->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  Lock lock(machine().mutex);
  const std::shared_ptr<ncclComm> c = comm_of(comm);
  if (!c) return ncclInvalidArgument;
  *device = c->device;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, std::size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream, seqpar_emu_site site) {
  Part p;
  p.kind = Kind::all_reduce;
  p.send = sendbuff;
  p.recv = recvbuff;
  p.count = count;
  p.type = datatype;
  p.op = op;
  return call(std::move(p), comm, stream, site);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, std::size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream, seqpar_emu_site site) {
  Part p;
  p.kind = Kind::reduce_scatter;
  p.send = sendbuff;
  p.recv = recvbuff;
  p.count = recvcount;
  p.type = datatype;
  p.op = op;
  return call(std::move(p), comm, stream, site);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, std::size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                           seqpar_emu_site site) {
  Part p;
  p.kind = Kind::all_gather;
  p.send = sendbuff;
  p.recv = recvbuff;
  p.count = sendcount;
  p.type = datatype;
  return call(std::move(p), comm, stream, site);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, std::size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream,
                           seqpar_emu_site site) {
  Part p;
  p.kind = Kind::broadcast;
  p.send = sendbuff;
  p.recv = recvbuff;
  p.count = count;
  p.type = datatype;
  p.root = root;
  return call(std::move(p), comm, stream, site);
}

ncclResult_t ncclSend(const void* sendbuff, std::size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream, seqpar_emu_site site) {
  Part p;
  p.kind = Kind::send;
  p.send = sendbuff;
  p.count = count;
  p.type = datatype;
  p.peer = peer;
  return call(std::move(p), comm, stream, site);
}

ncclResult_t ncclRecv(void* recvbuff, std::size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream, seqpar_emu_site site) {
  Part p;
  p.kind = Kind::recv;
  p.recv = recvbuff;
  p.count = count;
  p.type = datatype;
  p.peer = peer;
  return call(std::move(p), comm, stream, site);
}

ncclResult_t ncclGroupStart() {
  ++group_calls().depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd(seqpar_emu_site site) {
  Lock lock(machine().mutex);
  GroupCalls& g = group_calls();
  if (g.depth == 0)
    return refuse(ncclInvalidUsage,
                  "ncclGroupEnd at " + site_text(site) + " without ncclGroupStart");
  if (--g.depth > 0) return ncclSuccess;
  std::vector<Pending> pending = std::move(g.pending);
  g.pending.clear();
  // One queued operation per stream, its parts in call order.
  std::vector<std::shared_ptr<Stream>> streams;
  for (const Pending& p : pending)
    if (std::find(streams.begin(), streams.end(), p.stream) == streams.end())
      streams.push_back(p.stream);
  for (const auto& s : streams) {
    std::vector<Part> parts;
    for (Pending& p : pending)
      if (p.stream == s) parts.push_back(std::move(p.part));
    const Transport* t = parts.front().comm->group->transport.get();
    for (const Part& p : parts)
      if ((dynamic_cast<const InProcess*>(p.comm->group->transport.get()) == nullptr) !=
          (dynamic_cast<const InProcess*>(t) == nullptr))
        return refuse(ncclInvalidUsage, "ncclGroupEnd at " + site_text(site) +
                                            ": a group mixes communicators of this process and of "
                                            "several processes (not emulated)");
    queue(std::move(parts), s);
  }
  return ncclSuccess;
}
