/* SPDX-License-Identifier: Apache-2.0 */
/* Between the library's topology (topology.c), NVLink (nvlink.c) and fabric (fabric.c). */
#ifndef MOKKAFS_NVML_LINKS_H
#define MOKKAFS_NVML_LINKS_H

#include "view.h"

/* nvlink.c: whether two GPUs share an NVLink fabric: an active link of each reaches the same
 * NVSwitch (or, where the switches are not on the node's bus, any switch: one fabric) */
int nvlink_peers(nvmlDevice_t a, nvmlDevice_t b);

#endif
