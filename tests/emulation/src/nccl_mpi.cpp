// The emulated NCCL between processes (one rank each, started by mpirun): a communicator is an
// MPI communicator of its ranks' processes, made at ncclCommInitRank with the process that made
// the unique id; an operation starts its MPI transfers when its stream reaches it (non-blocking:
// a query does not wait) and completes when they have. Collectives gather every rank's input
// with a header, which is checked (every rank must make the same call), and reduce it in rank
// order; a send is synchronous (it completes when its receive has started), unless its
// receive's rank has posted it, as in an NCCL group.
#include "nccl_internal.hpp"

#if defined(SEQPAR_EMU_WITH_MPI)

#include <mpi.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace seqpar::emu::nccl {

namespace {

struct Header {
  std::int32_t kind, type, op, root;
  std::uint64_t count, seq;
};

struct Posted {
  std::vector<unsigned char> out, in;  // this rank's contribution, and what comes back
  MPI_Request request = MPI_REQUEST_NULL;
};

struct MpiState final : TransportState {
  std::vector<Posted> posted;  // one per part
};

int tag_of(std::uint64_t seq) { return 1 + static_cast<int>(seq % 32000); }

class OverMpi final : public Transport {
 public:
  OverMpi(Group& g, MPI_Comm c) : group_(g), comm_(c) {}
  ~OverMpi() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }

  void queued(Part&) override {}
  void broken(Group&) override { machine().progress.notify_all(); }

  CommOp::Result advance(QueuedOp& x) override {
    if (group_.broken) {
      for (Part& p : x.parts)
        if (!p.comm->aborted) p.comm->async_error = ncclRemoteError;
      x.done = true;
      return CommOp::Result::done;
    }
    if (!x.state) post(x);
    auto& st = static_cast<MpiState&>(*x.state);
    for (Posted& p : st.posted) {
      int flag = 0;
      MPI_Test(&p.request, &flag, MPI_STATUS_IGNORE);
      if (!flag) return CommOp::Result::blocked;
    }
    for (std::size_t i = 0; i < x.parts.size(); ++i) finish(x.parts[i], st.posted[i]);
    x.done = true;
    note_progress();
    return CommOp::Result::done;
  }

  std::shared_ptr<ncclComm> split(ncclComm& comm, int color, int key, Lock& lock,
                                  const std::string&) override {
    MPI_Comm sub = MPI_COMM_NULL;
    lock.unlock();
    MPI_Comm_split(comm_, color == NCCL_SPLIT_NOCOLOR ? MPI_UNDEFINED : color, key, &sub);
    lock.lock();
    if (sub == MPI_COMM_NULL) return nullptr;
    auto g = std::make_shared<Group>();
    MPI_Comm_size(sub, &g->size);
    g->number = static_cast<std::uint64_t>(1000000 + comm.splits++);
    g->transport = std::make_unique<OverMpi>(*g, sub);
    auto child = std::make_shared<ncclComm>();
    child->group = g;
    MPI_Comm_rank(sub, &child->rank);
    child->device = comm.device;
    return child;
  }

 private:
  void post(QueuedOp& x) {
    auto st = std::make_unique<MpiState>();
    st->posted.resize(x.parts.size());
    for (std::size_t i = 0; i < x.parts.size(); ++i) {
      const Part& p = x.parts[i];
      Posted& q = st->posted[i];
      const Header h{static_cast<std::int32_t>(p.kind), p.type, p.op, p.root, p.count, p.seq};
      const unsigned char* send = nullptr;
      unsigned char* recv = nullptr;
      const std::size_t sb = p.send_bytes(group_.size);
      const bool ok = part_views(p, group_.size, send, recv);
      q.out.resize(sizeof h + sb);
      std::memcpy(q.out.data(), &h, sizeof h);
      if (ok && sb) std::memcpy(q.out.data() + sizeof h, send, sb);
      const int n = static_cast<int>(q.out.size());
      switch (p.kind) {
        case Kind::all_reduce:
        case Kind::reduce_scatter:
        case Kind::all_gather:
          q.in.resize(q.out.size() * static_cast<std::size_t>(group_.size));
          MPI_Iallgather(q.out.data(), n, MPI_BYTE, q.in.data(), n, MPI_BYTE, comm_, &q.request);
          break;
        case Kind::broadcast: {
          q.in.resize(sizeof h + p.count * type_size(p.type));
          if (p.rank == p.root) q.in = q.out;
          MPI_Ibcast(q.in.data(), static_cast<int>(q.in.size()), MPI_BYTE, p.root, comm_,
                     &q.request);
          break;
        }
        case Kind::send:
          MPI_Issend(q.out.data(), n, MPI_BYTE, p.peer, tag_of(p.seq), comm_, &q.request);
          break;
        case Kind::recv:
          q.in.resize(sizeof h + p.count * type_size(p.type));
          MPI_Irecv(q.in.data(), static_cast<int>(q.in.size()), MPI_BYTE, p.peer, tag_of(p.seq),
                    comm_, &q.request);
          break;
      }
    }
    x.state = std::move(st);
  }

  void finish(const Part& p, const Posted& q) {
    const unsigned char* send = nullptr;
    unsigned char* recv = nullptr;
    if (!part_views(p, group_.size, send, recv)) return;
    const std::size_t e = type_size(p.type), block = p.count * e;
    const auto header_of = [](const unsigned char* b) {
      Header h;
      std::memcpy(&h, b, sizeof h);
      return h;
    };
    const auto check = [&](const Header& h, int from) {
      if (h.kind != static_cast<std::int32_t>(p.kind) || h.count != p.count || h.type != p.type ||
          ((p.kind == Kind::all_reduce || p.kind == Kind::reduce_scatter) && h.op != p.op) ||
          (p.kind == Kind::broadcast && h.root != p.root))
        fatal(p.describe() + " does not match rank " + std::to_string(from) + "'s " +
              kind_name(static_cast<Kind>(h.kind)) + " of " + std::to_string(h.count) +
              " elements: every rank must make the same call");
    };
    switch (p.kind) {
      case Kind::all_reduce:
      case Kind::reduce_scatter:
      case Kind::all_gather: {
        const std::size_t stride = q.out.size();
        std::vector<const unsigned char*> data(static_cast<std::size_t>(group_.size));
        for (int r = 0; r < group_.size; ++r) {
          const unsigned char* b = q.in.data() + static_cast<std::size_t>(r) * stride;
          check(header_of(b), r);
          data[static_cast<std::size_t>(r)] = b + sizeof(Header);
        }
        if (p.kind == Kind::all_reduce) {
          reduce_into(data, recv, p.count, p.type, p.op);
        } else if (p.kind == Kind::reduce_scatter) {
          for (auto& d : data) d += static_cast<std::size_t>(p.rank) * block;
          reduce_into(data, recv, p.count, p.type, p.op);
        } else {
          for (int r = 0; r < group_.size; ++r)
            std::memcpy(recv + static_cast<std::size_t>(r) * block,
                        data[static_cast<std::size_t>(r)], block);
        }
        break;
      }
      case Kind::broadcast:
        check(header_of(q.in.data()), p.root);
        std::memcpy(recv, q.in.data() + sizeof(Header), block);
        break;
      case Kind::recv: {
        const Header h = header_of(q.in.data());
        if (h.kind != static_cast<std::int32_t>(Kind::send) || h.count != p.count ||
            h.type != p.type)
          fatal(p.describe() + " received a message of " + std::to_string(h.count) +
                " elements: a send and its receive must have the same count and type");
        std::memcpy(recv, q.in.data() + sizeof(Header), block);
        break;
      }
      case Kind::send: break;
    }
  }

  Group& group_;
  MPI_Comm comm_;
};

struct IdContents {
  char magic[16];
  std::int64_t pid;
  std::uint64_t host;
  std::uint64_t nonce;
  std::int32_t creator_world_rank;
};

struct Member {
  std::int32_t rank, world, device, pad;
  std::uint64_t host;
};

}  // namespace

int mpi_world_rank() {
  int ready = 0, finalized = 0;
  MPI_Initialized(&ready);
  MPI_Finalized(&finalized);
  if (!ready || finalized) return -1;
  int r = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int mpi_world_size() {
  if (mpi_world_rank() < 0) return 1;
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

std::unique_ptr<Transport> mpi_transport(Group& g, int rank, const ncclUniqueId& id, int device,
                                         std::string& error) {
  const int world = mpi_world_rank();
  IdContents c{};
  std::memcpy(&c, id.internal, sizeof c);
  if (world < 0 || c.creator_world_rank < 0) {
    error =
        "the ranks of this communicator are in several processes, which the emulation joins "
        "with MPI: MPI must be initialised before ncclGetUniqueId and ncclCommInitRank";
    return nullptr;
  }
  char name[256] = {};
  (void)gethostname(name, sizeof name - 1);
  const Member me{rank, world, device, 0, std::hash<std::string>{}(name)};
  const int tag = 32000 + static_cast<int>(c.nonce % 700);
  std::vector<int> worlds(static_cast<std::size_t>(g.size), -1);
  std::int32_t verdict = 0;  // 1: refused
  if (world == c.creator_world_rank) {
    std::vector<Member> members{me};
    for (int i = 1; i < g.size; ++i) {
      Member m{};
      MPI_Recv(&m, sizeof m, MPI_BYTE, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      members.push_back(m);
    }
    for (const Member& m : members) {
      if (m.rank < 0 || m.rank >= g.size || worlds[static_cast<std::size_t>(m.rank)] >= 0) {
        verdict = 1;
        error = "rank " + std::to_string(m.rank) + " is out of range or joined twice";
      } else {
        worlds[static_cast<std::size_t>(m.rank)] = m.world;
      }
      for (const Member& o : members)
        if (&o != &m && o.host == m.host && o.device == m.device && o.rank < m.rank) {
          verdict = 1;
          error = "ranks " + std::to_string(o.rank) + " and " + std::to_string(m.rank) +
                  " are on device " + std::to_string(m.device) +
                  " of one node: NCCL refuses two ranks on one GPU";
        }
    }
    for (const Member& m : members) {
      if (m.world == world) continue;
      MPI_Send(&verdict, 1, MPI_INT32_T, m.world, tag + 1, MPI_COMM_WORLD);
      MPI_Send(worlds.data(), g.size, MPI_INT, m.world, tag + 1, MPI_COMM_WORLD);
    }
  } else {
    MPI_Send(&me, sizeof me, MPI_BYTE, c.creator_world_rank, tag, MPI_COMM_WORLD);
    MPI_Recv(&verdict, 1, MPI_INT32_T, c.creator_world_rank, tag + 1, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    MPI_Recv(worlds.data(), g.size, MPI_INT, c.creator_world_rank, tag + 1, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    if (verdict)
      error = "the communicator's ranks were refused (see rank " +
              std::to_string(c.creator_world_rank) + "'s message)";
  }
  if (verdict) return nullptr;
  MPI_Group all = MPI_GROUP_NULL, mine = MPI_GROUP_NULL;
  MPI_Comm_group(MPI_COMM_WORLD, &all);
  MPI_Group_incl(all, g.size, worlds.data(), &mine);
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_create_group(MPI_COMM_WORLD, mine, tag, &comm);
  MPI_Group_free(&mine);
  MPI_Group_free(&all);
  return std::make_unique<OverMpi>(g, comm);
}

}  // namespace seqpar::emu::nccl

#else  // no MPI

namespace seqpar::emu::nccl {

int mpi_world_rank() { return -1; }
int mpi_world_size() { return 1; }

std::unique_ptr<Transport> mpi_transport(Group&, int, const ncclUniqueId&, int,
                                         std::string& error) {
  error =
      "the ranks of this communicator are in several processes, which the emulation joins "
      "with MPI, and this build found no MPI";
  return nullptr;
}

}  // namespace seqpar::emu::nccl

#endif
