/* SPDX-License-Identifier: Apache-2.0 */
/* A GPU's MIG state at one call. What no kernel file holds (the mode, the profile table, each
 * instance's profile, placement and UUID) is in NVML's own place, run/mokkafs-nvml/gpus/<bdf>
 * (mokkafs/surfaces/nvml_mig.py); which instances exist is what the driver's capability files
 * list, proc/driver/nvidia/capabilities/gpu<minor>/mig/gi<G>/ci<C> (those the place describes
 * too: a change between the two reads shows the instances both hold). Read whole at each call:
 * nothing is cached. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mig.h"

#define CAPABILITIES "proc/driver/nvidia/capabilities"
#define UNITS 8 /* memory units of a GPU */

/* What the place says of the instances, by ID, before the capability files confirm them */
struct described {
    int gi[MIG_GIS];
    struct mig_gi gis[MIG_GIS];
    int ci[MIG_GIS][MIG_CIS];
    struct mig_ci cis[MIG_GIS][MIG_CIS];
};

/* A decimal that fits an unsigned int (number_of's rules): 0, or -1 */
static int number(const char *text, unsigned int *out)
{
    unsigned long long v;
    if (number_of(text, &v) != NVML_SUCCESS || v > 0xffffffffULL)
        return -1;
    *out = (unsigned int)v;
    return 0;
}

/* One "mig_..." line: 0, or -1 when it is malformed */
static int parse_line(char *key, const char *value, struct mig_gpu *out, struct described *d)
{
    unsigned int a, b;
    int n = -1;
    if (strcmp(key, "mig_index") == 0)
        return number(value, &out->index);
    if (strcmp(key, "mig_mode_current") == 0)
        return number(value, &out->current);
    if (strcmp(key, "mig_mode_pending") == 0)
        return number(value, &out->pending);
    if (strcmp(key, "mig_max_devices") == 0)
        return number(value, &out->max_devices);
    if (sscanf(key, "mig_gip.%u%n", &a, &n) == 1 && !key[n]) {
        struct mig_profile p = {.known = 1};
        if (a >= NVML_GPU_INSTANCE_PROFILE_COUNT
            || sscanf(value, "%u %u %u %u %llu %x %31s", &p.id, &p.slices, &p.most, &p.size,
                      &p.memory_mb, &p.starts, p.name) != 7
            || !p.slices || p.slices > UNITS || !p.size || p.size > UNITS || p.most > UNITS
            || p.starts >> UNITS)
            return -1;
        struct mig_profile *q = &out->profiles[a]; /* its units may come first */
        p.sm = q->sm, p.ce = q->ce, p.dec = q->dec, p.enc = q->enc, p.jpeg = q->jpeg;
        p.ofa = q->ofa;
        memcpy(p.ci_sm, q->ci_sm, sizeof(p.ci_sm));
        *q = p;
        return 0;
    }
    if (sscanf(key, "mig_gip_units.%u%n", &a, &n) == 1 && !key[n]) {
        struct mig_profile *p = a < NVML_GPU_INSTANCE_PROFILE_COUNT ? &out->profiles[a] : NULL;
        return p && sscanf(value, "%u %u %u %u %u %u %u %u %u %u %u", &p->sm, &p->ce, &p->dec,
                           &p->enc, &p->jpeg, &p->ofa, &p->ci_sm[0], &p->ci_sm[1],
                           &p->ci_sm[2], &p->ci_sm[3], &p->ci_sm[4]) == 11 ? 0 : -1;
    }
    if (sscanf(key, "mig_gi.%u%n", &a, &n) == 1 && !key[n]) {
        struct mig_gi gi = {.id = a};
        if (a >= MIG_GIS
            || sscanf(value, "%u %u %u %u", &gi.profile, &gi.start, &gi.size, &gi.slices) != 4
            || gi.start >= UNITS || !gi.size || gi.size > UNITS - gi.start || gi.slices > UNITS)
            return -1;
        d->gi[a] = 1;
        d->gis[a] = gi;
        return 0;
    }
    if (sscanf(key, "mig_ci.%u.%u%n", &a, &b, &n) == 2 && !key[n]) {
        struct mig_ci ci = {.id = b};
        if (a >= MIG_GIS || b >= MIG_CIS
            || sscanf(value, "%u %u %u %47s %31s", &ci.profile, &ci.slices, &ci.start, ci.uuid,
                      ci.name) != 5
            || ci.slices > UNITS || ci.start > UNITS)
            return -1;
        d->ci[a][b] = 1;
        d->cis[a][b] = ci;
        return 0;
    }
    return 0; /* a key of another part, or one this library does not know */
}

/* The IDs of the entries "<prefix><ID>" of ROOT/rel, as bits */
static unsigned int listed_ids(const char *rel, const char *prefix, unsigned int limit)
{
    char path[PATH_MAX];
    unsigned int ids = 0, id;
    int n;
    if (view_path(path, sizeof(path), rel) < 0)
        return 0;
    DIR *dir = opendir(path);
    if (!dir)
        return 0;
    size_t plen = strlen(prefix);
    struct dirent *e;
    while ((e = readdir(dir)) != NULL)
        if (strncmp(e->d_name, prefix, plen) == 0 && e->d_name[plen] >= '0'
            && e->d_name[plen] <= '9' && sscanf(e->d_name + plen, "%u%n", &id, &n) == 1
            && !e->d_name[plen + (size_t)n] && id < limit)
            ids |= 1u << id;
    closedir(dir);
    return ids;
}

/* The instances both the place and the capability files hold, in ID order */
static nvmlReturn_t confirm(nvmlDevice_t device, const struct described *d,
                            struct mig_gpu *out)
{
    char minor[32], rel[PATH_MAX];
    unsigned int gpu;
    nvmlReturn_t ret = gpu_info(device, "Device Minor", minor, sizeof(minor));
    if (ret != NVML_SUCCESS)
        return ret;
    if (number(minor, &gpu) < 0)
        return NVML_ERROR_UNKNOWN;
    snprintf(rel, sizeof(rel), "%s/gpu%u/mig", CAPABILITIES, gpu);
    unsigned int gis = listed_ids(rel, "gi", MIG_GIS);
    for (unsigned int g = 0; g < MIG_GIS; g++) {
        if (!(gis >> g & 1) || !d->gi[g])
            continue;
        struct mig_gi *gi = &out->gis[out->ngis++];
        *gi = d->gis[g];
        gi->ncis = 0;
        snprintf(rel, sizeof(rel), "%s/gpu%u/mig/gi%u", CAPABILITIES, gpu, g);
        unsigned int cis = listed_ids(rel, "ci", MIG_CIS);
        for (unsigned int c = 0; c < MIG_CIS; c++)
            if (cis >> c & 1 && d->ci[g][c])
                gi->cis[gi->ncis++] = d->cis[g][c];
    }
    return NVML_SUCCESS;
}

nvmlReturn_t mig_read(nvmlDevice_t device, struct mig_gpu *out)
{
    memset(out, 0, sizeof(*out));
    out->current = 2; /* none said yet */
    char *text = malloc(PLACE_FILE_SIZE);
    struct described *d = calloc(1, sizeof(*d));
    nvmlReturn_t ret = text && d ? NVML_SUCCESS : NVML_ERROR_MEMORY;
    if (ret == NVML_SUCCESS)
        ret = gpu_place(device, text, PLACE_FILE_SIZE);
    char *save = NULL;
    for (char *line = ret == NVML_SUCCESS ? strtok_r(text, "\n", &save) : NULL;
         line && ret == NVML_SUCCESS; line = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(line, '=');
        if (strncmp(line, "mig_", 4) != 0 || !eq)
            continue;
        *eq = '\0';
        if (parse_line(line, eq + 1, out, d) < 0)
            ret = NVML_ERROR_UNKNOWN;
    }
    if (ret == NVML_SUCCESS && out->current > 1)
        ret = NVML_ERROR_NOT_SUPPORTED; /* no MIG table: no MIG keys */
    if (ret == NVML_SUCCESS && out->current)
        ret = confirm(device, d, out);
    free(text);
    free(d);
    return ret;
}

struct mig_gpu *mig_load(nvmlDevice_t device, nvmlReturn_t *ret)
{
    struct mig_gpu *g = malloc(sizeof(*g));
    *ret = g ? mig_read(device, g) : NVML_ERROR_MEMORY;
    if (*ret != NVML_SUCCESS) {
        free(g);
        return NULL;
    }
    return g;
}

const struct mig_profile *mig_profile_by_id(const struct mig_gpu *g, unsigned int id)
{
    for (unsigned int i = 0; i < NVML_GPU_INSTANCE_PROFILE_COUNT; i++)
        if (g->profiles[i].known && g->profiles[i].id == id)
            return &g->profiles[i];
    return NULL;
}

const struct mig_gi *mig_gi_by_id(const struct mig_gpu *g, unsigned int id)
{
    for (unsigned int i = 0; i < g->ngis; i++)
        if (g->gis[i].id == id)
            return &g->gis[i];
    return NULL;
}

const struct mig_ci *mig_ci_by_id(const struct mig_gi *gi, unsigned int id)
{
    for (unsigned int i = 0; i < gi->ncis; i++)
        if (gi->cis[i].id == id)
            return &gi->cis[i];
    return NULL;
}

static unsigned int units(unsigned int start, unsigned int size)
{
    return ((1u << size) - 1) << start;
}

int mig_room(const struct mig_gpu *g, const struct mig_profile *p, unsigned int start)
{
    unsigned int used = 0, slices = 0, same = 0;
    for (unsigned int i = 0; i < g->ngis; i++) {
        used |= units(g->gis[i].start, g->gis[i].size);
        slices += g->gis[i].slices;
        same += g->gis[i].profile == p->id;
    }
    return start < UNITS && p->starts >> start & 1 && start + p->size <= UNITS
        && !(used & units(start, p->size)) && same < p->most
        && slices + p->slices <= g->max_devices;
}

int mig_free_start(const struct mig_gpu *g, const struct mig_profile *p)
{
    for (int s = UNITS - 1; s >= 0; s--)
        if (mig_room(g, p, (unsigned int)s))
            return s;
    return -1;
}

unsigned int mig_ci_slices_in(const struct mig_gi *gi, unsigned int profile)
{
    unsigned int slices = mig_ci_slices(profile);
    return slices <= gi->slices ? slices : 0;
}

int mig_ci_allowed(unsigned int slices, unsigned int gi_slices, unsigned int start)
{
    unsigned int align = 1;
    while (align < slices)
        align <<= 1;
    return slices > 0 && start % align == 0 && start + slices <= gi_slices;
}

int mig_ci_free(const struct mig_gi *gi, unsigned int slices, unsigned int start)
{
    for (unsigned int i = 0; i < gi->ncis; i++)
        if (start < gi->cis[i].start + gi->cis[i].slices && gi->cis[i].start < start + slices)
            return 0;
    return mig_ci_allowed(slices, gi->slices, start);
}

int mig_ci_free_start(const struct mig_gi *gi, unsigned int slices)
{
    for (int s = (int)gi->slices - 1; s >= 0; s--)
        if (mig_ci_free(gi, slices, (unsigned int)s))
            return s;
    return -1;
}

unsigned int mig_ci_slices(unsigned int profile)
{
    /* COMPUTE_INSTANCE_PROFILE_{1,2,3,4,7}_SLICE */
    static const unsigned int slices[] = {1, 2, 3, 4, 7};
    return profile < sizeof(slices) / sizeof(slices[0]) ? slices[profile] : 0;
}
