/* SPDX-License-Identifier: Apache-2.0 */
/* Every name of the API (exports.h) as a weak stub answering NVML_ERROR_NOT_SUPPORTED.
 * A function the library implements is a strong definition in another file and wins at
 * link time. A stub reads none of its arguments and returns an int in the return register:
 * safe for any signature on x86-64 and aarch64. This file includes no declaration of the
 * API, so the stubs' own signature clashes with none. */

#define NVML_ERROR_NOT_SUPPORTED 3

#define NVML_NAME(name) \
    __attribute__((weak, visibility("default"))) int name(void); \
    int name(void) { return NVML_ERROR_NOT_SUPPORTED; }
#include "exports.h"
