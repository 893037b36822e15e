// A kernel library built for another kernel ABI version, which the runtime must refuse.
#include "hidet/kernel_abi.h"

HIDET_KERNEL_EXPORT int32_t hidet_kernel_abi_version(void) { return HIDET_KERNEL_ABI_VERSION + 998; }

HIDET_KERNEL_EXPORT const char* hidet_kernel_last_error(void) { return ""; }
