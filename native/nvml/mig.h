/* SPDX-License-Identifier: Apache-2.0 */
/* Between the library's MIG files: a GPU's MIG state read at a call (mig_view.c), the GPU and
 * compute instance handles (mig_handles.c), and the daemon's control socket (control.c). */
#ifndef MOKKAFS_NVML_MIG_H
#define MOKKAFS_NVML_MIG_H

#include "view.h"

#define MIG_GIS 15       /* GPU instances of a GPU (the driver's minor table) */
#define MIG_CIS 8        /* compute instances of a GPU instance */
#define MIG_NAME 32      /* a profile's name and its NUL */
#define MIG_UUID 48      /* "MIG-" and a UUID, and its NUL */
#define MIB (1ULL << 20)

/* A GPU instance profile (mig_gip.<enum> of NVML's own place) */
struct mig_profile {
    int known;
    unsigned int id, slices, most, size, starts; /* starts: a bit per allowed start */
    unsigned long long memory_mb;
    char name[MIG_NAME];
    /* mig_gip_units.<enum>: SMs and engines (0 where no table says), and the SMs of a
     * compute instance of 1, 2, 3, 4, 7 slices in it (by COMPUTE_INSTANCE_PROFILE_*) */
    unsigned int sm, ce, dec, enc, jpeg, ofa, ci_sm[5];
};

struct mig_ci {
    unsigned int id, profile, slices, start;
    char uuid[MIG_UUID];
    char name[MIG_NAME];
};

struct mig_gi {
    unsigned int id, profile, start, size, slices, ncis;
    struct mig_ci cis[MIG_CIS]; /* in ID order */
};

/* A GPU's MIG state at one call: the place's keys and the instances the capability files
 * list (those the place describes too) */
struct mig_gpu {
    unsigned int index, current, pending, max_devices;
    struct mig_profile profiles[NVML_GPU_INSTANCE_PROFILE_COUNT]; /* by NVML's enum */
    unsigned int ngis;
    struct mig_gi gis[MIG_GIS]; /* in ID order */
};

/* mig_view.c: the MIG state of a GPU (not a MIG device) whose handle was checked, into a
 * struct of the caller's: NVML_SUCCESS; NOT_SUPPORTED when the GPU has no MIG table (or the
 * place is not there); GPU_IS_LOST; UNKNOWN when a file is malformed */
nvmlReturn_t mig_read(nvmlDevice_t device, struct mig_gpu *out);
/* A checked GPU's (not a MIG device's) state, allocated: free() it. NULL with *ret set. */
struct mig_gpu *mig_load(nvmlDevice_t device, nvmlReturn_t *ret);
/* The profile of nvidia-smi's profile ID, or NULL */
const struct mig_profile *mig_profile_by_id(const struct mig_gpu *g, unsigned int id);
const struct mig_gi *mig_gi_by_id(const struct mig_gpu *g, unsigned int id);
const struct mig_ci *mig_ci_by_id(const struct mig_gi *gi, unsigned int id);
/* The start the driver gives a new instance of p: the highest allowed free one (as
 * `mokkafs mig -cgi`); -1 when none is free or the GPU holds no more of p */
int mig_free_start(const struct mig_gpu *g, const struct mig_profile *p);
/* Is the placement free of every instance, and may one more of p be made? */
int mig_room(const struct mig_gpu *g, const struct mig_profile *p, unsigned int start);
/* The slices a compute instance profile (COMPUTE_INSTANCE_PROFILE_*) spans, or 0 */
unsigned int mig_ci_slices(unsigned int profile);
/* The slices of a compute instance profile that fits in gi; 0 for one that does not, or no
 * such profile */
unsigned int mig_ci_slices_in(const struct mig_gi *gi, unsigned int profile);
/* May a compute instance of slices start there in a GPU instance of gi_slices: at a multiple
 * of its size rounded up to a power of two, within the GI (mokkafs/model/mig_tables.py,
 * ci_starts)? And is it free of gi's compute instances too? */
int mig_ci_allowed(unsigned int slices, unsigned int gi_slices, unsigned int start);
int mig_ci_free(const struct mig_gi *gi, unsigned int slices, unsigned int start);
/* The highest free start of a new compute instance of slices, as the daemon places it; -1 */
int mig_ci_free_start(const struct mig_gi *gi, unsigned int slices);

/* mig_handles.c: the handles of GPU and compute instances, made at their first use and
 * never freed (NULL when the table is full); *_resolve checks a caller's handle: nvmlInit,
 * ours (else INVALID_ARGUMENT), its GPU there (GPU_IS_LOST), then its instance at this
 * call (gone: INVALID_ARGUMENT); the GPU's handle, its state (free() it) and the instance */
nvmlGpuInstance_t gi_handle_of(const char *bdf, unsigned int gi);
nvmlComputeInstance_t ci_handle_of(const char *bdf, unsigned int gi, unsigned int ci);
nvmlReturn_t gi_resolve(nvmlGpuInstance_t handle, nvmlDevice_t *device, struct mig_gpu **g,
                        const struct mig_gi **gi);
nvmlReturn_t ci_resolve(nvmlComputeInstance_t handle, nvmlDevice_t *device,
                        struct mig_gpu **g, const struct mig_gi **gi, const struct mig_ci **ci);
/* A MIG device's handle (handle_check_any passed): its GPU's state and its instances */
nvmlReturn_t mig_device_resolve(nvmlDevice_t device, struct mig_gpu **g,
                                const struct mig_gi **gi, const struct mig_ci **ci);

/* control.c: one MIG request to the daemon's control socket, {"op": "mig", "action": action,
 * "gpu": index, "profiles": [profile] (when profile >= 0), "starts": [start] (when start >= 0),
 * "gi": [gi] (when gi >= 0), "ci": [ci] (when ci >= 0), "mode": mode (when mode >= 0)}.
 * NVML_SUCCESS when it was carried out; NO_PERMISSION without a socket (MOKKAFS_CONTROL), one
 * the caller may not reach, or a daemon that refused the caller; TIMEOUT; UNKNOWN. *refused is
 * set when the daemon answered it would not make the change (its bounds: the caller says
 * which NVML error that is). */
struct mig_request {
    const char *action;
    unsigned int index;
    int profile, start, gi, ci, mode; /* -1: not in the request */
};
nvmlReturn_t control_mig(const struct mig_request *req, int *refused);

#endif
