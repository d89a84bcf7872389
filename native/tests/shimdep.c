/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A library of shimtest's whose constructor reads the view. A program's own libraries are
 * initialised before LD_PRELOAD's, so this runs before the shim's constructor: the shim must
 * set itself up on first use.
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

int shimdep_vendor_read; /* 1: the constructor read the view's vendor file */

__attribute__((constructor)) static void shimdep_early(void) {
    char buf[16] = {0};
    int fd = open("/sys/bus/pci/devices/0000:1b:00.0/vendor", O_RDONLY);
    if (fd < 0)
        return;
    shimdep_vendor_read = read(fd, buf, sizeof buf - 1) == 7 && strcmp(buf, "0x10de\n") == 0;
    close(fd);
}
