// cuBLAS on the emulated device: handles, their stream and workspace, and the GEMMs seqpar
// calls (cublas_v2.h). A GEMM is checked as cuBLAS checks it when it is called, and runs when
// its stream runs; an operand that does not lie inside one live device allocation of the
// handle's device makes it fail as an illegal address, as the kernel would on a GPU.
#include <cublas_v2.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "machine.hpp"

struct cublasContext {
  int device = 0;
  cudaStream_t stream = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  bool live = true;
};

using namespace seqpar::emu;

namespace {

std::map<const void*, std::unique_ptr<cublasContext>>& handles() {
  static auto* h = new std::map<const void*, std::unique_ptr<cublasContext>>;  // never destroyed
  return *h;
}

cublasContext* handle_of(cublasHandle_t h) {
  auto it = handles().find(h);
  return it == handles().end() || !it->second->live ? nullptr : it->second.get();
}

cublasStatus_t refuse(cublasStatus_t s, const std::string& detail) {
  std::fprintf(stderr, "seqpar emulated CUDA: cuBLAS: %s: %s\n", cublasGetStatusName(s),
               detail.c_str());
  return s;
}

std::size_t size_of(cudaDataType_t t) {
  switch (t) {
    case CUDA_R_32F: return 4;
    case CUDA_R_64F: return 8;
    case CUDA_R_16F:
    case CUDA_R_16BF: return 2;
  }
  return 0;
}

const char* type_name(cudaDataType_t t) {
  switch (t) {
    case CUDA_R_32F: return "CUDA_R_32F";
    case CUDA_R_64F: return "CUDA_R_64F";
    case CUDA_R_16F: return "CUDA_R_16F";
    case CUDA_R_16BF: return "CUDA_R_16BF";
  }
  return "an unknown cudaDataType_t";
}

float load(const void* p, cudaDataType_t t, std::int64_t i) {
  switch (t) {
    case CUDA_R_32F: return static_cast<const float*>(p)[i];
    case CUDA_R_16F: return static_cast<float>(static_cast<const __half*>(p)[i]);
    case CUDA_R_16BF: return static_cast<float>(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return 0;
  }
}

void store(void* p, cudaDataType_t t, std::int64_t i, float v) {
  switch (t) {
    case CUDA_R_32F: static_cast<float*>(p)[i] = v; break;
    case CUDA_R_16F: static_cast<__half*>(p)[i] = __half(v); break;
    case CUDA_R_16BF: static_cast<__nv_bfloat16*>(p)[i] = __nv_bfloat16(v); break;
    default: break;
  }
}

// The value as a TF32 tensor core reads it: 10 bits of mantissa, rounded to nearest.
float tf32(float x) {
  if (!std::isfinite(x)) return x;
  std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
  return std::bit_cast<float>(u);
}

struct Gemm {
  cublasOperation_t ta, tb;
  int m, n, k, lda, ldb, ldc, batch;
  long long sa, sb, sc;
  float alpha, beta;
  const void *A, *B;
  void* C;
  cudaDataType_t at, bt, ct;
  bool tf32_inputs;
};

// Element (i, j) of op(X), X column-major with leading dimension ld.
float op_at(const void* x, cudaDataType_t t, cublasOperation_t op, int ld, std::int64_t i,
            std::int64_t j) {
  return op == CUBLAS_OP_N ? load(x, t, i + j * std::int64_t{ld})
                           : load(x, t, j + i * std::int64_t{ld});
}

// The bytes an operand of `rows` x `cols` (as stored) spans, over the batch.
std::size_t extent(int rows, int cols, int ld, long long stride, int batch, std::size_t elem) {
  if (rows == 0 || cols == 0 || batch == 0) return 0;
  const std::int64_t last =
      std::int64_t{cols - 1} * ld + rows - 1 + std::int64_t{batch - 1} * (stride > 0 ? stride : 0);
  return static_cast<std::size_t>(last + 1) * elem;
}

void run_gemm(const Gemm& g, const void* A, const void* B, void* C) {
  for (int b = 0; b < g.batch; ++b) {
    const auto* a = static_cast<const char*>(A) + b * g.sa * static_cast<long long>(size_of(g.at));
    const auto* bb = static_cast<const char*>(B) + b * g.sb * static_cast<long long>(size_of(g.bt));
    auto* c = static_cast<char*>(C) + b * g.sc * static_cast<long long>(size_of(g.ct));
    for (int j = 0; j < g.n; ++j)
      for (int i = 0; i < g.m; ++i) {
        double sum = 0;
        for (int l = 0; l < g.k; ++l) {
          float x = op_at(a, g.at, g.ta, g.lda, i, l), y = op_at(bb, g.bt, g.tb, g.ldb, l, j);
          if (g.tf32_inputs) x = tf32(x), y = tf32(y);
          sum += static_cast<double>(x) * static_cast<double>(y);
        }
        const std::int64_t ci = i + std::int64_t{j} * g.ldc;
        double out = static_cast<double>(g.alpha) * sum;
        if (g.beta != 0.0f) out += static_cast<double>(g.beta) * load(c, g.ct, ci);
        store(c, g.ct, ci, static_cast<float>(out));
      }
  }
}

cublasStatus_t gemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                    int m, int n, int k, const void* alpha, const void* A, cudaDataType_t Atype,
                    int lda, long long strideA, const void* B, cudaDataType_t Btype, int ldb,
                    long long strideB, const void* beta, void* C, cudaDataType_t Ctype, int ldc,
                    long long strideC, int batch, cublasComputeType_t compute, const char* call,
                    const seqpar_emu_site& site) {
  Lock lock(machine().mutex);
  const std::string at = std::string(call) + " at " + site_text(site);
  cublasContext* h = handle_of(handle);
  if (!h) return refuse(CUBLAS_STATUS_NOT_INITIALIZED, at + ": not a live handle");
  const auto is_op = [](cublasOperation_t o) { return o == CUBLAS_OP_N || o == CUBLAS_OP_T; };
  if (!is_op(transa) || !is_op(transb))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, at + ": a transpose that is neither N nor T");
  if (m < 0 || n < 0 || k < 0 || batch < 0)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, at + ": m, n, k = " + std::to_string(m) + ", " +
                                                   std::to_string(n) + ", " + std::to_string(k) +
                                                   ", batch " + std::to_string(batch));
  const int a_rows = transa == CUBLAS_OP_N ? m : k, b_rows = transb == CUBLAS_OP_N ? k : n;
  if (lda < std::max(1, a_rows) || ldb < std::max(1, b_rows) || ldc < std::max(1, m))
    return refuse(CUBLAS_STATUS_INVALID_VALUE,
                  at + ": leading dimensions lda " + std::to_string(lda) + " (op(A) rows " +
                      std::to_string(a_rows) + "), ldb " + std::to_string(ldb) + " (" +
                      std::to_string(b_rows) + "), ldc " + std::to_string(ldc) + " (m " +
                      std::to_string(m) + ")");
  // The combinations cuBLAS documents for these compute types.
  bool supported = Atype == Btype;
  if (compute == CUBLAS_COMPUTE_32F) {
    supported = supported && ((Atype == CUDA_R_32F && Ctype == CUDA_R_32F) ||
                              ((Atype == CUDA_R_16F || Atype == CUDA_R_16BF) &&
                               (Ctype == Atype || Ctype == CUDA_R_32F)));
  } else if (compute == CUBLAS_COMPUTE_32F_FAST_TF32) {
    supported = supported && Atype == CUDA_R_32F && Ctype == CUDA_R_32F;
  } else {
    supported = false;
  }
  if (!supported)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                  at + ": A " + type_name(Atype) + ", B " + type_name(Btype) + ", C " +
                      type_name(Ctype) + " under compute type " + std::to_string(compute));
  if (!alpha || !beta) return refuse(CUBLAS_STATUS_INVALID_VALUE, at + ": a null alpha or beta");
  const std::shared_ptr<Stream> s = stream_of(h->stream);
  if (!s) return refuse(CUBLAS_STATUS_EXECUTION_FAILED, at + ": the handle's stream is gone");
  Gemm g{transa,
         transb,
         m,
         n,
         k,
         lda,
         ldb,
         ldc,
         batch,
         strideA,
         strideB,
         strideC,
         *static_cast<const float*>(alpha),  // host pointer mode: read now
         *static_cast<const float*>(beta),
         A,
         B,
         C,
         Atype,
         Btype,
         Ctype,
         compute == CUBLAS_COMPUTE_32F_FAST_TF32};
  if (m == 0 || n == 0 || batch == 0) return CUBLAS_STATUS_SUCCESS;
  Op op;
  op.what = at;
  const int device = h->device;
  op.run = [g, device, at] {
    // Every operand inside one live allocation of the device, translated.
    struct Operand {
      const void* p;
      std::size_t bytes;
      const char* name;
    } operands[3] = {
        {g.A,
         g.k == 0 ? 0
                  : extent(g.ta == CUBLAS_OP_N ? g.m : g.k, g.ta == CUBLAS_OP_N ? g.k : g.m, g.lda,
                           g.sa, g.batch, size_of(g.at)),
         "A"},
        {g.B,
         g.k == 0 ? 0
                  : extent(g.tb == CUBLAS_OP_N ? g.k : g.n, g.tb == CUBLAS_OP_N ? g.n : g.k, g.ldb,
                           g.sb, g.batch, size_of(g.bt)),
         "B"},
        {g.C, extent(g.m, g.n, g.ldc, g.sc, g.batch, size_of(g.ct)), "C"}};
    void* view[3] = {};
    for (int i = 0; i < 3; ++i) {
      if (operands[i].bytes == 0) continue;
      const Allocation* x = find_allocation(operands[i].p, operands[i].bytes);
      if (!x || x->device != device) {
        fail_device(device, cudaErrorIllegalAddress,
                    at + ": operand " + operands[i].name + " [" + describe_address(operands[i].p) +
                        ", +" + std::to_string(operands[i].bytes) +
                        " bytes) is not inside one live allocation of device " +
                        std::to_string(device));
        return cudaErrorIllegalAddress;
      }
      view[i] = to_emu(operands[i].p);
    }
    run_gemm(g, view[0], view[1], view[2]);
    for (int i = 0; i < 3; ++i)
      if (view[i])
        if (const std::string bad = check_canaries(*find_allocation(operands[i].p)); !bad.empty()) {
          fail_device(device, cudaErrorIllegalAddress, at + ": " + bad);
          return cudaErrorIllegalAddress;
        }
    return cudaSuccess;
  };
  enqueue(s, std::move(op));
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

cublasStatus_t cublasCreate(cublasHandle_t* handle, seqpar_emu_site) {
  Lock lock(machine().mutex);
  auto h = std::make_unique<cublasContext>();
  h->device = current_device();
  *handle = h.get();
  handles().emplace(h.get(), std::move(h));
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle, seqpar_emu_site site) {
  Lock lock(machine().mutex);
  if (!handle_of(handle))
    return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "cublasDestroy at " + site_text(site));
  handles().erase(handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream, seqpar_emu_site site) {
  Lock lock(machine().mutex);
  cublasContext* h = handle_of(handle);
  if (!h) return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetStream at " + site_text(site));
  const std::shared_ptr<Stream> s = stream_of(stream);
  if (!s || s->device != h->device)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasSetStream at " + site_text(site) +
                                                   ": not a live stream of the handle's device");
  h->stream = stream;
  // As cuBLAS documents: setting the stream drops a user workspace.
  h->workspace = nullptr;
  h->workspace_bytes = 0;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* stream, seqpar_emu_site) {
  Lock lock(machine().mutex);
  cublasContext* h = handle_of(handle);
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  *stream = h->stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, std::size_t bytes,
                                  seqpar_emu_site site) {
  Lock lock(machine().mutex);
  cublasContext* h = handle_of(handle);
  if (!h) return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetWorkspace at " + site_text(site));
  if (workspace && !find_allocation(workspace, bytes))
    return refuse(CUBLAS_STATUS_INVALID_VALUE,
                  "cublasSetWorkspace at " + site_text(site) + ": [" + describe_address(workspace) +
                      ", +" + std::to_string(bytes) +
                      " bytes) is not inside one live device allocation");
  h->workspace = workspace;
  h->workspace_bytes = bytes;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
  }
  return "unknown status";
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType_t Atype, int lda, const void* B,
                            cudaDataType_t Btype, int ldb, const void* beta, void* C,
                            cudaDataType_t Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t, seqpar_emu_site site) {
  return gemm(handle, transa, transb, m, n, k, alpha, A, Atype, lda, 0, B, Btype, ldb, 0, beta, C,
              Ctype, ldc, 0, 1, computeType, "cublasGemmEx", site);
}

cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const void* alpha, const void* A, cudaDataType_t Atype, int lda, long long strideA,
    const void* B, cudaDataType_t Btype, int ldb, long long strideB, const void* beta, void* C,
    cudaDataType_t Ctype, int ldc, long long strideC, int batchCount,
    cublasComputeType_t computeType, cublasGemmAlgo_t, seqpar_emu_site site) {
  return gemm(handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb,
              strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType,
              "cublasGemmStridedBatchedEx", site);
}
