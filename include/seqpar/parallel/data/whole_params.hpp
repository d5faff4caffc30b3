#pragma once
// WholeParamsAxis: the data axes whose model keeps every parameter whole (Replicated and
// ZeRO-1/2): the optimizer updates this rank's range in place, and sharded ranks
// all-gather the units after.

#include <cstdint>

#include "seqpar/backend/device.hpp"
#include "seqpar/comm/any_comm.hpp"
#include "seqpar/optim/offload.hpp"
#include "seqpar/parallel/data/axis_base.hpp"

namespace seqpar::inline v0::detail {

template <UnitStore Stack, Device D, class T, bool Sharded>
class WholeParamsAxis : public DataAxisBase<Stack, D, T, Sharded> {
  using Base = DataAxisBase<Stack, D, T, Sharded>;

 public:
  using typename Base::Master;

  /// AdamW on this rank's range of every unit, then, when sharded, the units made whole
  /// again. `grad_factor` multiplies the gradients first (16-bit models: 1 / loss scale x clip).
  void optimizer_step(const kernels::AdamCoeffs& c, double grad_factor = 1.0) {
    Stack& m = this->model();
    for (std::size_t u = 0; u < m.units().size(); ++u) {
      if (!m.holds(u)) continue;
      const std::int64_t size = this->range_size(u);
      this->update_range(u, m.params(u) + this->own_offset(u), c, grad_factor);
      if constexpr (Sharded) {
        if (this->degree() == 1) continue;  // one rank updated the whole unit in place
        Buffer<T, typename Base::Arena> mine(m.arena(), static_cast<std::size_t>(size),
                                             Memory::buffers);
        Ops<D>::copy(mine.data(), m.params(u) + this->rank() * size, size);
        this->comm().all_gather(mine.data(), m.params(u), static_cast<std::size_t>(size));
      }
    }
  }

  /// Unit u's full parameters (padded_numel(u) values) copied into host memory.
  void read_params(std::size_t u, T* host) {
    Ops<D>::download(host, this->model().params(u), this->model().padded_numel(u));
  }

  /// Sets unit u's full parameters from host memory (padded_numel(u) values of the master
  /// type: float for 16-bit models, else T): the model's copy gets them rounded to T, the
  /// master weights of this rank's range get them exactly.
  void write_params(std::size_t u, const Master* host) {
    const auto full = this->upload_full(u, host);
    Ops<D>::convert(this->model().params(u), full.data(), this->model().padded_numel(u));
    this->set_master(u, full.data(), host);
  }

 protected:
  WholeParamsAxis(Stack& model, AnyComm comm, Memory shard_memory, Offload offload)
      : Base(model, std::move(comm), shard_memory, offload) {
    SEQPAR_CHECK(offload != Offload::optimizer_and_params, "data axis (",
                 Sharded ? "ZeRO-1/2" : "Replicated",
                 "): Offload::optimizer_and_params offloads parameter shards, which only "
                 "Sharded<Zero3, N> keeps; use Offload::optimizer here, or ZeRO-3");
  }

 private:
  const T* weights_range(std::size_t u) override {
    return this->model().params(u) + this->own_offset(u);
  }
};

}  // namespace seqpar::inline v0::detail
