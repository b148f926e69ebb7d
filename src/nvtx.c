/* NVTX v3 ranges for ginbench (see src/profile.rs). NVTX v3 is header-only: on first use it
 * looks for an injected tool (NVTX_INJECTION64_PATH, set by Nsight Systems) and otherwise turns
 * every call into a no-op. */
#ifdef GB_HAVE_NVTX3
#include <nvtx3/nvToolsExt.h>
void gb_nvtx_push(const char* name) { nvtxRangePushA(name); }
void gb_nvtx_pop(void) { nvtxRangePop(); }
int gb_nvtx_built(void) { return 1; }
#else
void gb_nvtx_push(const char* name) { (void)name; }
void gb_nvtx_pop(void) {}
int gb_nvtx_built(void) { return 0; }
#endif
