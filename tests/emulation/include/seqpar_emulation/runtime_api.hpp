#pragma once
// The emulated CUDA runtime's host API: the types and functions of cuda_runtime_api.h that
// seqpar calls, with the CUDA documentation's semantics, implemented by the emulation
// library (tests/emulation/src). Device memory lives in an address range the host cannot
// touch; asynchronous work runs only when something waits for it. A call that fails returns
// the runtime's error code, and the emulation's cudaGetErrorString adds what it saw (the
// call site, the pointer, the kernel) to the generic message.
//
// Every call records its caller (std::source_location as a defaulted last argument) so that
// a diagnostic names the line of the program that made it.

#include <cstddef>
#include <source_location>

#include "library_types.h"

#define CUDART_VERSION 13000
#define CUDA_VERSION 13000

using seqpar_emu_site = std::source_location;
#define SEQPAR_EMU_SITE seqpar_emu_site site = seqpar_emu_site::current()

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidPitchValue = 12,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchOutOfResources = 701,
  cudaErrorLaunchFailure = 719,
  cudaErrorUnknown = 999,
};

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaMemoryType {
  cudaMemoryTypeUnregistered = 0,
  cudaMemoryTypeHost = 1,
  cudaMemoryTypeDevice = 2,
  cudaMemoryTypeManaged = 3,
};

struct cudaPointerAttributes {
  cudaMemoryType type;
  int device;
  void* devicePointer;
  void* hostPointer;
};

struct CUuuid_st {
  char bytes[16];
};
using cudaUUID_t = CUuuid_st;

struct cudaDeviceProp {
  char name[256];
  cudaUUID_t uuid;
  std::size_t totalGlobalMem;
  std::size_t sharedMemPerBlock;
  std::size_t sharedMemPerBlockOptin;
  int regsPerBlock;
  int warpSize;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int major;
  int minor;
  int multiProcessorCount;
  int unifiedAddressing;
};

struct CUstream_st;
struct CUevent_st;
using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;

#define cudaStreamDefault 0x00u
#define cudaStreamNonBlocking 0x01u
#define cudaEventDefault 0x00u
#define cudaEventBlockingSync 0x01u
#define cudaEventDisableTiming 0x02u
#define cudaHostAllocDefault 0x00u
#define cudaHostAllocPortable 0x01u
#define cudaHostAllocMapped 0x02u
#define cudaHostAllocWriteCombined 0x04u

// The legacy default stream, as the runtime spells it.
#define cudaStreamLegacy (reinterpret_cast<cudaStream_t>(0x1))

const char* cudaGetErrorName(cudaError_t error);
const char* cudaGetErrorString(cudaError_t error);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();

cudaError_t cudaGetDeviceCount(int* count, SEQPAR_EMU_SITE);
cudaError_t cudaGetDevice(int* device, SEQPAR_EMU_SITE);
cudaError_t cudaSetDevice(int device, SEQPAR_EMU_SITE);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device, SEQPAR_EMU_SITE);
cudaError_t cudaDeviceSynchronize(SEQPAR_EMU_SITE);
cudaError_t cudaDeviceReset(SEQPAR_EMU_SITE);
cudaError_t cudaRuntimeGetVersion(int* version);
cudaError_t cudaDriverGetVersion(int* version);
cudaError_t cudaMemGetInfo(std::size_t* free, std::size_t* total, SEQPAR_EMU_SITE);

cudaError_t cudaMalloc(void** ptr, std::size_t bytes, SEQPAR_EMU_SITE);
cudaError_t cudaFree(void* ptr, SEQPAR_EMU_SITE);
cudaError_t cudaMallocHost(void** ptr, std::size_t bytes, SEQPAR_EMU_SITE);
cudaError_t cudaHostAlloc(void** ptr, std::size_t bytes, unsigned flags, SEQPAR_EMU_SITE);
cudaError_t cudaFreeHost(void* ptr, SEQPAR_EMU_SITE);
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr,
                                     SEQPAR_EMU_SITE);

cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                       SEQPAR_EMU_SITE);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr, SEQPAR_EMU_SITE);
cudaError_t cudaMemset(void* ptr, int value, std::size_t bytes, SEQPAR_EMU_SITE);
cudaError_t cudaMemsetAsync(void* ptr, int value, std::size_t bytes, cudaStream_t stream = nullptr,
                            SEQPAR_EMU_SITE);

cudaError_t cudaStreamCreate(cudaStream_t* stream, SEQPAR_EMU_SITE);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags, SEQPAR_EMU_SITE);
cudaError_t cudaStreamDestroy(cudaStream_t stream, SEQPAR_EMU_SITE);
cudaError_t cudaStreamSynchronize(cudaStream_t stream, SEQPAR_EMU_SITE);
cudaError_t cudaStreamQuery(cudaStream_t stream, SEQPAR_EMU_SITE);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags = 0,
                                SEQPAR_EMU_SITE);

cudaError_t cudaEventCreate(cudaEvent_t* event, SEQPAR_EMU_SITE);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags, SEQPAR_EMU_SITE);
cudaError_t cudaEventDestroy(cudaEvent_t event, SEQPAR_EMU_SITE);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr, SEQPAR_EMU_SITE);
cudaError_t cudaEventSynchronize(cudaEvent_t event, SEQPAR_EMU_SITE);
cudaError_t cudaEventQuery(cudaEvent_t event, SEQPAR_EMU_SITE);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end, SEQPAR_EMU_SITE);
