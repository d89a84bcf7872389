/* SPDX-License-Identifier: Apache-2.0 */
/* What NVML's C test programs share: expect() prints a "FAIL ..." line and counts it in
 * failures, from any thread. */
#ifndef MOKKAFS_NVML_TEST_EXPECT_H
#define MOKKAFS_NVML_TEST_EXPECT_H

#include <pthread.h>
#include <stdio.h>

#include "../nvml/nvml_api.h"

static int failures;
static pthread_mutex_t failed_lock = PTHREAD_MUTEX_INITIALIZER;

static void expect(const char *what, nvmlReturn_t got, nvmlReturn_t want)
{
    if (got == want)
        return;
    pthread_mutex_lock(&failed_lock);
    failures++;
    printf("FAIL %s: %d (%s), expected %d\n", what, got, nvmlErrorString(got), want);
    pthread_mutex_unlock(&failed_lock);
}

#endif
