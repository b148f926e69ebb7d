// Build-time helper (run by build.rs, never shipped): prints NCCL's struct initializers as Rust
// byte arrays, so the Rust side starts from exactly what NCCL_*_INITIALIZER set in these headers.
// NCCL 2.28 has no device-API initializers: its requirements struct starts zeroed (as nccl-tests
// does); ncclConfig_t has its initializer in every generation.
#include <nccl.h>
#include <nccl_device.h>
#include <stddef.h>
#include <stdio.h>

#ifndef GB_NCCL_CFGS
#error "compile through build.rs, which defines GB_NCCL_* from the NCCL version table"
#endif

static void dump(const char* name, const void* p, size_t n) {
  printf("pub const %s: [u8; %zu] = [", name, n);
  for (size_t i = 0; i < n; i++) printf("%u,", ((const unsigned char*)p)[i]);
  printf("];\n");
}

// Static storage: padding is zero, so the bytes are deterministic.
#if GB_NCCL_VERSIONED_STRUCTS
static ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
static ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
#else
static ncclDevCommRequirements_t reqs;
#endif
// Every supported generation (2.28 on) has NCCL_CONFIG_INITIALIZER (size, magic, version, and
// NCCL_CONFIG_UNDEF_* for every knob, meaning "NCCL's default").
static ncclConfig_t config = NCCL_CONFIG_INITIALIZER;

int main() {
  dump("DEV_COMM_REQUIREMENTS", &reqs, sizeof reqs);
  dump("CONFIG", &config, sizeof config);
  // ncclDevComm is opaque to the Rust side; the GIN context count NCCL granted is read back from
  // it (uint8_t up to 2.29.3, uint32_t from 2.29.7 on).
  printf("pub const DEV_COMM_GIN_CONTEXT_COUNT: (usize, usize) = (%zu, %zu);\n",
         offsetof(ncclDevComm, ginContextCount), sizeof(((ncclDevComm*)0)->ginContextCount));
#if GB_NCCL_VERSIONED_STRUCTS
  dump("COMM_PROPERTIES", &props, sizeof props);
#endif
  return 0;
}
