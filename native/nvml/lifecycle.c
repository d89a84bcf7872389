/* SPDX-License-Identifier: Apache-2.0 */
/* nvmlInit and nvmlShutdown, the error strings, and the versions: the driver's is the one
 * proc/driver/nvidia/version of the view prints; the CUDA and NVML versions follow from it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "view.h"

NVML_API nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags; /* no GPU is attached, so NO_GPUS and NO_ATTACH change nothing */
    return view_open();
}

NVML_API nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
NVML_API nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

NVML_API nvmlReturn_t nvmlShutdown(void)
{
    nvmlReturn_t ret = view_check();
    if (ret == NVML_SUCCESS)
        view_close();
    return ret;
}

NVML_API const char *nvmlErrorString(nvmlReturn_t result)
{
    static const char *const text[] = {
        [NVML_SUCCESS] = "Success",
        [NVML_ERROR_UNINITIALIZED] = "Uninitialized",
        [NVML_ERROR_INVALID_ARGUMENT] = "Invalid Argument",
        [NVML_ERROR_NOT_SUPPORTED] = "Not Supported",
        [NVML_ERROR_NO_PERMISSION] = "Insufficient Permissions",
        [NVML_ERROR_ALREADY_INITIALIZED] = "Already Initialized",
        [NVML_ERROR_NOT_FOUND] = "Not Found",
        [NVML_ERROR_INSUFFICIENT_SIZE] = "Insufficient Size",
        [NVML_ERROR_INSUFFICIENT_POWER] = "Insufficient External Power",
        [NVML_ERROR_DRIVER_NOT_LOADED] = "Driver Not Loaded",
        [NVML_ERROR_TIMEOUT] = "Timeout",
        [NVML_ERROR_IRQ_ISSUE] = "Interrupt Request Issue",
        [NVML_ERROR_LIBRARY_NOT_FOUND] = "NVML Shared Library Not Found",
        [NVML_ERROR_FUNCTION_NOT_FOUND] = "Function Not Found",
        [NVML_ERROR_CORRUPTED_INFOROM] = "Corrupted infoROM",
        [NVML_ERROR_GPU_IS_LOST] = "GPU is lost",
        [NVML_ERROR_RESET_REQUIRED] = "GPU requires restart",
        [NVML_ERROR_OPERATING_SYSTEM] = "The operating system has blocked the request",
        [NVML_ERROR_LIB_RM_VERSION_MISMATCH] = "RM has detected an NVML/RM version mismatch",
        [NVML_ERROR_IN_USE] = "In use by another client",
        [NVML_ERROR_MEMORY] = "Insufficient Memory",
        [NVML_ERROR_NO_DATA] = "No data",
        [NVML_ERROR_VGPU_ECC_NOT_SUPPORTED] = "The vGPU operation is not supported while ECC is enabled",
        [NVML_ERROR_INSUFFICIENT_RESOURCES] = "Ran out of critical resources, other than memory",
        [NVML_ERROR_FREQ_NOT_SUPPORTED] = "The requested frequency is not supported",
        [NVML_ERROR_ARGUMENT_VERSION_MISMATCH] = "The provided version is invalid or unsupported",
        [NVML_ERROR_DEPRECATED] = "The requested functionality has been deprecated",
        [NVML_ERROR_NOT_READY] = "The system is not ready for the request",
        [NVML_ERROR_GPU_NOT_FOUND] = "The GPU was not found",
        [NVML_ERROR_INVALID_STATE] = "The operation is not allowed in the current state",
        [NVML_ERROR_RESET_TYPE_NOT_SUPPORTED] = "The reset type is not supported",
    };
    unsigned int code = (unsigned int)result;
    if (code < sizeof(text) / sizeof(text[0]) && text[code])
        return text[code];
    return "Unknown Error";
}

/* The version in the NVRM line: its first word of digits and dots with a dot */
static nvmlReturn_t driver_version(char *out, size_t size)
{
    char text[512];
    if (view_read(DRIVER_VERSION, text, sizeof(text)) < 0)
        return NVML_ERROR_DRIVER_NOT_LOADED;
    text[strcspn(text, "\n")] = '\0';
    char *save = NULL;
    for (char *word = strtok_r(text, " \t", &save); word; word = strtok_r(NULL, " \t", &save)) {
        size_t n = strlen(word);
        if (strspn(word, "0123456789.") == n && strchr(word, '.') && word[0] != '.'
            && n < size) {
            memcpy(out, word, n + 1);
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_UNKNOWN;
}

/* The CUDA version a driver branch supports (CUDA's release notes): major*1000 + minor*10;
 * where the profile states one, the system file of NVML's own place has it instead */
static int cuda_of_branch(unsigned long branch)
{
    static const struct { unsigned int branch; int cuda; } table[] = {
        {418, 10010}, {440, 10020}, {450, 11000}, {455, 11010}, {460, 11020}, {465, 11030},
        {470, 11040}, {495, 11050}, {510, 11060}, {515, 11070}, {520, 11080}, {525, 12000},
        {530, 12010}, {535, 12020}, {545, 12030}, {550, 12040}, {555, 12050}, {560, 12060},
        {565, 12070}, {570, 12080}, {575, 12090}, {580, 13000}, {590, 13010},
    };
    int cuda = 0;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (branch >= table[i].branch)
            cuda = table[i].cuda;
    return cuda;
}

static nvmlReturn_t cuda_version(int *cuda)
{
    char version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    nvmlReturn_t ret = view_check();
    if (ret == NVML_SUCCESS && !cuda)
        ret = NVML_ERROR_INVALID_ARGUMENT;
    if (ret == NVML_SUCCESS)
        ret = driver_version(version, sizeof(version));
    if (ret != NVML_SUCCESS)
        return ret;
    unsigned long long stated = 0; /* the profile's word, in NVML's own place */
    if (system_number("cuda_driver_version", &stated) == NVML_SUCCESS && stated <= 99990) {
        *cuda = (int)stated;
        return NVML_SUCCESS;
    }
    int found = cuda_of_branch(strtoul(version, NULL, 10));
    if (!found)
        return NVML_ERROR_NOT_SUPPORTED;
    *cuda = found;
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
    return cuda_version(cudaDriverVersion);
}

NVML_API nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
    return cuda_version(cudaDriverVersion);
}

NVML_API nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    char found[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    nvmlReturn_t ret = view_check();
    if (ret == NVML_SUCCESS && !version)
        ret = NVML_ERROR_INVALID_ARGUMENT;
    if (ret == NVML_SUCCESS)
        ret = driver_version(found, sizeof(found));
    return ret == NVML_SUCCESS ? copy_out(version, length, found) : ret;
}

/* "<CUDA major>.<driver version>", as the real library answers (12.550.163.01) */
NVML_API nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    char found[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE], text[2 * sizeof(found)];
    int cuda = 0;
    nvmlReturn_t ret = version ? cuda_version(&cuda) : NVML_ERROR_INVALID_ARGUMENT;
    if (ret == NVML_SUCCESS)
        ret = driver_version(found, sizeof(found));
    if (ret != NVML_SUCCESS)
        return ret;
    snprintf(text, sizeof(text), "%d.%s", cuda / 1000, found);
    return copy_out(version, length, text);
}
