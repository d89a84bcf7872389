/* SPDX-License-Identifier: Apache-2.0 */
/* The library's inside: where the view is (view.c), its GPUs and the handles (gpus.c). */
#ifndef MOKKAFS_NVML_VIEW_H
#define MOKKAFS_NVML_VIEW_H

#include <stddef.h>

#include "nvml_api.h"

#define BDF_SIZE 20    /* "dddd:bb:dd.f" (a domain of up to 8 digits) and its NUL */
#define MAX_GPUS 64    /* GPUs one enumeration lists */
#define FILE_SIZE 4096 /* the largest view file the library reads */

/* A handle's target: a GPU by its sysfs bus ID. Handles are never freed. */
struct nvmlDevice_st {
    char bdf[BDF_SIZE];
};

/* The NVIDIA driver's files, below the root */
#define DRIVER_VERSION "proc/driver/nvidia/version"
#define DRIVER_GPUS "proc/driver/nvidia/gpus"
#define PCI_DEVICES "sys/bus/pci/devices"

/* view.c: the root, taken at the first nvmlInit; NVML_SUCCESS or DRIVER_NOT_LOADED */
nvmlReturn_t view_open(void);
/* Is the library initialized (a count of nvmlInit calls not yet shut down)? */
nvmlReturn_t view_check(void);
void view_close(void);
/* The file at ROOT/rel read whole into buf (NUL-terminated): its length, or -1 */
long view_read(const char *rel, char *buf, size_t size);
/* ROOT/rel in out; 0, or -1 if it does not fit */
int view_path(char *out, size_t size, const char *rel);

/* The value of "key: value" in text (the driver's information file): 0, or -1 */
int text_field(const char *text, const char *key, char *out, size_t size);
/* s without its leading and trailing white space, in place */
char *trim(char *s);
/* src and its NUL into dst of length bytes: NVML_SUCCESS or INSUFFICIENT_SIZE */
nvmlReturn_t copy_out(char *dst, unsigned int length, const char *src);

/* gpus.c: a sysfs bus ID's parts (the kernel's lowercase spelling): 0, or -1 */
int bdf_split(const char *bdf, unsigned int *domain, unsigned int *bus, unsigned int *dev,
              unsigned int *fn);
/* The GPUs the driver lists (not excluded), in PCI order: how many, or -1 */
int gpus_list(char bdfs[][BDF_SIZE], int max);
/* The handle of a bus ID (made at its first use), or NULL when the table is full */
nvmlDevice_t handle_of(const char *bdf);
/* Checks a caller's handle: INVALID_ARGUMENT unless it is ours, GPU_IS_LOST when its GPU
 * left the view, else NVML_SUCCESS. Checks nvmlInit first. */
nvmlReturn_t handle_check(nvmlDevice_t device);
/* One field of the GPU's information file: NVML_SUCCESS, GPU_IS_LOST or UNKNOWN */
nvmlReturn_t gpu_info(nvmlDevice_t device, const char *key, char *out, size_t size);
/* One attribute of the GPU's sysfs directory, trimmed: NVML_SUCCESS, GPU_IS_LOST or UNKNOWN */
nvmlReturn_t gpu_attr(nvmlDevice_t device, const char *attr, char *out, size_t size);
/* An attribute as a number (strtoul, base 0): NVML_SUCCESS, GPU_IS_LOST or UNKNOWN */
nvmlReturn_t gpu_attr_number(nvmlDevice_t device, const char *attr, unsigned long *value);

#endif
