/* SPDX-License-Identifier: Apache-2.0 */
/* The library's inside: where the view is (view.c), its GPUs and the handles (gpus.c). */
#ifndef MOKKAFS_NVML_VIEW_H
#define MOKKAFS_NVML_VIEW_H

#include <stddef.h>

#include "nvml_api.h"

#define BDF_SIZE 20    /* "dddd:bb:dd.f" (a domain of up to 8 digits) and its NUL */
#define MAX_GPUS 64    /* GPUs one enumeration lists */
#define FILE_SIZE 4096 /* the largest view file the library reads */

/* A handle's target: a GPU by its sysfs bus ID, or one of its MIG devices (mig set: compute
 * instance ci of GPU instance gi). Handles are never freed. */
struct nvmlDevice_st {
    char bdf[BDF_SIZE];
    int mig;
    unsigned int gi, ci;
};

/* The NVIDIA driver's files, below the root */
#define DRIVER_VERSION "proc/driver/nvidia/version"
#define DRIVER_GPUS "proc/driver/nvidia/gpus"
#define PCI_DEVICES "sys/bus/pci/devices"
/* The daemon's own place for what no kernel file holds (mokkafs/surfaces/nvml.py) */
#define NVML_GPUS "run/mokkafs-nvml/gpus"
#define NVML_SYSTEM "run/mokkafs-nvml/system"

/* view.c: the root, taken at the first nvmlInit; NVML_SUCCESS or DRIVER_NOT_LOADED */
nvmlReturn_t view_open(void);
/* Is the library initialized (a count of nvmlInit calls not yet shut down)? */
nvmlReturn_t view_check(void);
void view_close(void);
/* The file at ROOT/rel read whole into buf (NUL-terminated): its length, or -1 */
long view_read(const char *rel, char *buf, size_t size);
/* The daemon's control socket (MOKKAFS_CONTROL at the first nvmlInit): 0, or -1 when none */
int view_control(char *out, size_t size);
/* ROOT/rel in out; 0, or -1 if it does not fit */
int view_path(char *out, size_t size, const char *rel);

/* The value of "key: value" in text (the driver's information file): 0, or -1 */
int text_field(const char *text, const char *key, char *out, size_t size);
/* The value of "key<sep>value" in text, white space trimmed: 0, or -1 */
int line_value(const char *text, const char *key, char sep, char *out, size_t size);
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
/* The handle of a MIG device, likewise */
nvmlDevice_t mig_handle_of(const char *bdf, unsigned int gi, unsigned int ci);
/* Is the GPU there and on the bus: its config space readable, its vendor ID not all ones? */
int gpu_present(const char *bdf);
/* Checks a caller's handle: INVALID_ARGUMENT unless it is ours, GPU_IS_LOST when its GPU
 * left the view or fell off the bus, else NVML_SUCCESS. Checks nvmlInit first. A MIG
 * device's handle passes handle_check_any (its GPU's checks) and not handle_check, which
 * answers NOT_SUPPORTED for it: the calls that take one check it with the first. */
nvmlReturn_t handle_check(nvmlDevice_t device);
nvmlReturn_t handle_check_any(nvmlDevice_t device);
/* One field of the GPU's information file: NVML_SUCCESS, GPU_IS_LOST or UNKNOWN */
nvmlReturn_t gpu_info(nvmlDevice_t device, const char *key, char *out, size_t size);
/* One attribute of the GPU's sysfs directory, trimmed: NVML_SUCCESS, GPU_IS_LOST or UNKNOWN */
nvmlReturn_t gpu_attr(nvmlDevice_t device, const char *attr, char *out, size_t size);
/* An attribute as a number (strtoul, base 0): NVML_SUCCESS, GPU_IS_LOST or UNKNOWN */
nvmlReturn_t gpu_attr_number(nvmlDevice_t device, const char *attr, unsigned long *value);

/* mig_devices.c: a MIG device's "GPU UUID" or "Model" (key as in the information file; others
 * NOT_SUPPORTED) into the caller's buffer; its memory; the handle of a MIG device's UUID */
nvmlReturn_t mig_device_text(nvmlDevice_t device, const char *key, char *out,
                             unsigned int length);
nvmlReturn_t mig_memory(nvmlDevice_t device, unsigned long long *total,
                        unsigned long long *reserved, unsigned long long *used);
nvmlReturn_t mig_handle_by_uuid(const char *uuid, nvmlDevice_t *device);

/* processes.c: the memory the processes running on the GPU of device hold, all of them and
 * those in GPU instance gi: NVML_SUCCESS (none known: 0), or the place's error */
nvmlReturn_t process_memory(nvmlDevice_t device, unsigned int gi, unsigned long long *all,
                            unsigned long long *in_gi);

/* pci.c: the PCI info of any function of the view (an NVSwitch), as for a GPU: NVML_SUCCESS
 * or UNKNOWN */
nvmlReturn_t function_pci_info(const char *bdf, nvmlPciInfo_t *pci);


/* values.c: a key of the GPU's file in NVML's own place (NVML_GPUS/<bdf>). NVML_SUCCESS;
 * NOT_SUPPORTED when the file or the key is not there (the profile cannot say); GPU_IS_LOST
 * when the GPU left the view; UNKNOWN when the value is malformed or too long. */
nvmlReturn_t gpu_value(nvmlDevice_t device, const char *key, char *out, size_t size);
/* The GPU's whole file, NUL-terminated, with gpu_value's answers; PLACE_FILE_SIZE holds it */
#define PLACE_FILE_SIZE 16384 /* a GPU's file with every NVLink's keys is a few KiB */
nvmlReturn_t gpu_place(nvmlDevice_t device, char *text, size_t size);
/* A decimal number, nothing else: NVML_SUCCESS or UNKNOWN */
nvmlReturn_t number_of(const char *text, unsigned long long *value);
nvmlReturn_t gpu_number(nvmlDevice_t device, const char *key, unsigned long long *value);
/* A caller's handle checked, its output not NULL, and the key as an unsigned int there */
nvmlReturn_t gpu_uint_out(nvmlDevice_t device, const char *key, unsigned int *out);
/* A key of NVML_SYSTEM as a number: NVML_SUCCESS, NOT_SUPPORTED or UNKNOWN */
nvmlReturn_t system_number(const char *key, unsigned long long *value);

#endif
