#pragma once
// Mesh: a global rank's coordinates on the (pipeline, data, tensor) grid, tensor
// innermost so that a tensor group is made of neighbouring ranks, and the three
// sub-communicators split from the world.

#include <array>

#include "seqpar/comm/any_comm.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/parallel/plan.hpp"

namespace seqpar::inline v0 {

/// The three axes of a plan's grid.
enum class MeshAxis { data, tensor, pipeline };

/// Every axis, in the order reports list them.
inline constexpr std::array<MeshAxis, 3> mesh_axes{MeshAxis::data, MeshAxis::tensor,
                                                   MeshAxis::pipeline};

/// "data", "tensor" or "pipeline".
constexpr const char* axis_name(MeshAxis a) {
  return a == MeshAxis::data ? "data" : a == MeshAxis::tensor ? "tensor" : "pipeline";
}

/// A value for each axis (bytes sent, degrees), indexed by MeshAxis.
template <class T>
struct PerAxis {
  T data{}, tensor{}, pipeline{};
  T& operator[](MeshAxis a) {
    return a == MeshAxis::data ? data : a == MeshAxis::tensor ? tensor : pipeline;
  }
  const T& operator[](MeshAxis a) const {
    return a == MeshAxis::data ? data : a == MeshAxis::tensor ? tensor : pipeline;
  }
};

/// One rank's place in a plan and the groups it belongs to.
struct Mesh {
  int tensor_degree = 1, data_degree = 1, pipeline_degree = 1;
  int tensor_rank = 0, data_rank = 0, pipeline_rank = 0;
  AnyComm world, tensor, data, pipeline;

  /// The world rank at coordinates (pipeline, data, tensor): tensor innermost, pipeline
  /// outermost. Every rank's own coordinates satisfy world_rank(pipeline_rank, data_rank,
  /// tensor_rank) == world.rank().
  int world_rank(int pipeline, int data, int tensor) const {
    return (pipeline * data_degree + data) * tensor_degree + tensor;
  }

  /// This rank's coordinates (the inverse of world_rank) and its three groups.
  template <ParallelPlan Plan>
  static Mesh make(AnyComm world) {
    using P = PlanTraits<Plan>;
    Mesh m;
    m.world = world;
    const int n = world.size();
    m.tensor_degree = P::tensor_degree;
    m.pipeline_degree = P::pipeline_degree;
    const int others = P::tensor_degree * P::pipeline_degree;
    if constexpr (P::data_degree == dynamic) {
      SEQPAR_CHECK(n % others == 0, "rank ", world.rank(), ": the world has ", n,
                   " ranks, not a multiple of tensor x pipeline = ", others,
                   " for the dynamic data degree");
      m.data_degree = n / others;
    } else {
      m.data_degree = P::data_degree;
    }
    SEQPAR_CHECK(n == m.data_degree * others, "rank ", world.rank(), ": the plan needs ",
                 m.data_degree * others, " ranks (data ", m.data_degree, " x tensor ",
                 m.tensor_degree, " x pipeline ", m.pipeline_degree, ") but the communicator has ",
                 n);
    const int r = world.rank();
    m.tensor_rank = r % m.tensor_degree;
    m.data_rank = (r / m.tensor_degree) % m.data_degree;
    m.pipeline_rank = r / (m.tensor_degree * m.data_degree);
    if (n > 1) {
      m.tensor = world.split(m.pipeline_rank * m.data_degree + m.data_rank, m.tensor_rank);
      m.data = world.split(m.pipeline_rank * m.tensor_degree + m.tensor_rank, m.data_rank);
      m.pipeline = world.split(m.data_rank * m.tensor_degree + m.tensor_rank, m.pipeline_rank);
    }
    return m;
  }

  /// This rank's group along `axis`.
  const AnyComm& group(MeshAxis axis) const {
    return axis == MeshAxis::data ? data : axis == MeshAxis::tensor ? tensor : pipeline;
  }
};

}  // namespace seqpar::inline v0
