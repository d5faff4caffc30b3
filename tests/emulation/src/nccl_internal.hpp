#pragma once
// The emulated NCCL's communicators and queued operations, shared by the in-process ranks
// (nccl.cpp) and the ranks of several processes (nccl_mpi.cpp). Internal to the emulation.

#include <nccl.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "machine.hpp"

namespace seqpar::emu::nccl {

enum class Kind { all_reduce, reduce_scatter, all_gather, broadcast, send, recv };
const char* kind_name(Kind k);
std::size_t type_size(ncclDataType_t t);

struct QueuedOp;
struct Group;

/// One rank's part of a collective or of a point-to-point transfer.
struct Part {
  Kind kind = Kind::all_reduce;
  std::shared_ptr<ncclComm> comm;
  int rank = 0;
  const void* send = nullptr;
  void* recv = nullptr;
  std::size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int root = 0, peer = -1;
  std::uint64_t seq = 0;  // collectives: the communicator's count; p2p: per peer and direction
  std::string site;
  QueuedOp* owner = nullptr;
  std::string describe() const;
  /// Bytes this rank reads from send and writes to recv.
  std::size_t send_bytes(int group_size) const;
  std::size_t recv_bytes(int group_size) const;
};

/// The part of the transport that belongs to one queued operation (MPI requests and buffers).
struct TransportState {
  virtual ~TransportState() = default;
};

/// The operations one call (or one ncclGroupStart/End group) queued on one stream.
struct QueuedOp final : CommOp {
  std::vector<Part> parts;
  std::shared_ptr<Stream> stream;
  std::uint64_t stream_seq = 0;
  int device = 0;
  std::unique_ptr<TransportState> state;
  Result advance() override;
  std::string describe() const override;
};

/// How a group's ranks meet: threads of this process, or processes (MPI).
class Transport {
 public:
  virtual ~Transport() = default;
  /// Completes op (and, in process, its peers' parts) or says it cannot yet.
  virtual CommOp::Result advance(QueuedOp& op) = 0;
  /// Notes a queued part (in process: for its peers to find).
  virtual void queued(Part& part) = 0;
  /// ncclCommSplit of rank `comm`: its new group (null for NCCL_SPLIT_NOCOLOR).
  virtual std::shared_ptr<ncclComm> split(ncclComm& comm, int color, int key, Lock& lock,
                                          const std::string& at) = 0;
  /// The peers' parts may never come (an abort): pending and later operations fail.
  virtual void broken(Group& g) = 0;
};

struct Group {
  int size = 1;
  std::uint64_t number = 0;  // for messages
  bool broken = false;
  std::string broken_why;
  std::unique_ptr<Transport> transport;
  std::string name() const {
    return "communicator " + std::to_string(number) + " (" + std::to_string(size) + " ranks)";
  }
};

/// Moves the data of a complete set of parts of one collective (one per rank, in rank order)
/// or of one send and its receive: reads every input first (operations may be in place).
/// Pointers are in the emulation's view.
void reduce_into(const std::vector<const unsigned char*>& inputs, unsigned char* out,
                 std::size_t count, ncclDataType_t type, ncclRedOp_t op);

/// Checks that the parts of one collective agree; a description of the disagreement or "".
std::string mismatch(const std::vector<const Part*>& parts);

/// The emulation-view pointers of a part's buffers, after checking them against the part's
/// device's allocations (a failure is made sticky on that device: false).
bool part_views(const Part& p, int group_size, const unsigned char*& send, unsigned char*& recv);

/// Ranks in several processes: the group over MPI (nccl_mpi.cpp).
std::unique_ptr<Transport> mpi_transport(Group& g, int rank, const ncclUniqueId& id, int device,
                                         std::string& error);
/// This process's MPI world rank, or -1 without MPI.
int mpi_world_rank();
// The processes of MPI_COMM_WORLD, or 1 where MPI is not running.
int mpi_world_size();

}  // namespace seqpar::emu::nccl

struct ncclComm {
  std::shared_ptr<seqpar::emu::nccl::Group> group;
  int rank = 0;
  int device = 0;
  bool aborted = false;
  ncclResult_t async_error = ncclSuccess;
  std::uint64_t collectives = 0;
  std::map<int, std::uint64_t> sends, recvs;  // by peer
  std::uint64_t splits = 0;
};
