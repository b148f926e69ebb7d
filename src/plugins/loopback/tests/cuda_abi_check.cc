// Build-time cross-check (compiled with -fsyntax-only against the toolkit's cuda.h by
// build_support.rs; never linked): the driver declarations in cuda_api.h match CUDA's.
#include <cuda.h>

#include <cstddef>
#include <type_traits>

#include "../cuda_api.h"

namespace cu = gbl::cu;

static_assert(cu::kOk == CUDA_SUCCESS, "CUresult");
static_assert(cu::kNotReady == CUDA_ERROR_NOT_READY, "CUresult");
static_assert(cu::kPeerAccessAlreadyEnabled == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "CUresult");
static_assert(cu::kStreamNonBlocking == CU_STREAM_NON_BLOCKING, "stream flags");
static_assert(cu::kEventDisableTiming == CU_EVENT_DISABLE_TIMING, "event flags");
static_assert(cu::kPointerAttrDeviceOrdinal == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, "pointer attribute");
static_assert(cu::kDevAttrCanUse64BitStreamMemOps == CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
              "device attribute");
static_assert(cu::kMemLocationTypeDevice == CU_MEM_LOCATION_TYPE_DEVICE, "memory location");
static_assert(cu::kMemAccessReadWrite == CU_MEM_ACCESS_FLAGS_PROT_READWRITE, "access flags");
static_assert(sizeof(cu::MemLocation) == sizeof(CUmemLocation), "CUmemLocation");
static_assert(sizeof(cu::MemAccessDesc) == sizeof(CUmemAccessDesc), "CUmemAccessDesc");
static_assert(offsetof(cu::MemAccessDesc, flags) == offsetof(CUmemAccessDesc, flags), "CUmemAccessDesc");
static_assert(cu::kMemHandleTypePosixFd == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, "handle type");
static_assert(cu::kMemAllocGranularityMinimum == CU_MEM_ALLOC_GRANULARITY_MINIMUM, "granularity option");
static_assert(sizeof(cu::MemHandle) == sizeof(CUmemGenericAllocationHandle), "CUmemGenericAllocationHandle");
static_assert(sizeof(cu::MemAllocationProp) == sizeof(CUmemAllocationProp), "CUmemAllocationProp");
static_assert(offsetof(cu::MemAllocationProp, location) == offsetof(CUmemAllocationProp, location),
              "CUmemAllocationProp");
static_assert(offsetof(cu::MemAllocationProp, win32HandleMetaData) ==
                  offsetof(CUmemAllocationProp, win32HandleMetaData),
              "CUmemAllocationProp");
static_assert(offsetof(cu::MemAllocationProp, allocFlags) == offsetof(CUmemAllocationProp, allocFlags),
              "CUmemAllocationProp");
static_assert(sizeof(cu::DevicePtr) == sizeof(CUdeviceptr), "CUdeviceptr");
static_assert(sizeof(cu::Device) == sizeof(CUdevice), "CUdevice");
static_assert(sizeof(cu::Status) == sizeof(CUresult), "CUresult");

// The entry points, with the signatures cuda.h gives the names the plugin dlsyms.
template <typename A, typename B>
constexpr bool sameShape = std::is_same<A, B>::value;
static_assert(sizeof(&cuMemcpyAsync) == sizeof(cu::Api::memcpyAsync), "pointer size");
static_assert(sameShape<decltype(&cuMemSetAccess), CUresult (*)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t)>,
              "cuMemSetAccess");
static_assert(sameShape<decltype(&cuStreamWriteValue64_v2), CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned)>,
              "cuStreamWriteValue64_v2");
static_assert(sameShape<decltype(&cuMemGetAddressRange_v2), CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr)>,
              "cuMemGetAddressRange_v2");
static_assert(sameShape<decltype(&cuMemcpyDtoHAsync_v2), CUresult (*)(void*, CUdeviceptr, size_t, CUstream)>,
              "cuMemcpyDtoHAsync_v2");
static_assert(sameShape<decltype(&cuMemRetainAllocationHandle), CUresult (*)(CUmemGenericAllocationHandle*, void*)>,
              "cuMemRetainAllocationHandle");
static_assert(sameShape<decltype(&cuMemExportToShareableHandle),
                        CUresult (*)(void*, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
                                     unsigned long long)>,
              "cuMemExportToShareableHandle");
static_assert(sameShape<decltype(&cuMemImportFromShareableHandle),
                        CUresult (*)(CUmemGenericAllocationHandle*, void*, CUmemAllocationHandleType)>,
              "cuMemImportFromShareableHandle");
static_assert(sameShape<decltype(&cuMemGetAllocationPropertiesFromHandle),
                        CUresult (*)(CUmemAllocationProp*, CUmemGenericAllocationHandle)>,
              "cuMemGetAllocationPropertiesFromHandle");
static_assert(sameShape<decltype(&cuMemGetAllocationGranularity),
                        CUresult (*)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags)>,
              "cuMemGetAllocationGranularity");
static_assert(sameShape<decltype(&cuMemAddressReserve),
                        CUresult (*)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long)>,
              "cuMemAddressReserve");
static_assert(sameShape<decltype(&cuMemAddressFree), CUresult (*)(CUdeviceptr, size_t)>, "cuMemAddressFree");
static_assert(sameShape<decltype(&cuMemMap),
                        CUresult (*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long)>,
              "cuMemMap");
static_assert(sameShape<decltype(&cuMemUnmap), CUresult (*)(CUdeviceptr, size_t)>, "cuMemUnmap");
static_assert(sameShape<decltype(&cuMemRelease), CUresult (*)(CUmemGenericAllocationHandle)>, "cuMemRelease");
static_assert(sameShape<decltype(&cuCtxGetDevice), CUresult (*)(CUdevice*)>, "cuCtxGetDevice");
