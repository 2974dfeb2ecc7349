/* cora_runtime.h: the C ABI between libcora (or a user) and generated kernels.
 *
 * A generated entry point has the signature (a GPU kernel's: see cora_device_t)
 *     int32_t entry(const cora_arg_t *args, int32_t nargs, char *error, int32_t error_size);
 * It validates every argument before touching memory, returns CORA_OK on success, or a
 * non-zero status with a NUL-terminated message in `error` and no output written. */
#ifndef CORA_RUNTIME_H
#define CORA_RUNTIME_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cora_type_code {
    CORA_TYPE_INT32 = 1,
    CORA_TYPE_INT64 = 2,
    CORA_TYPE_FLOAT32 = 3,
    CORA_TYPE_FLOAT64 = 4,
} cora_type_code;

typedef enum cora_status {
    CORA_OK = 0,
    CORA_ERROR_ARGUMENT = 1, /* bad argument: count, type, size, range, consistency */
    CORA_ERROR_ALLOCATION = 2,
    CORA_ERROR_DEVICE = 3, /* a device call (launch, allocation) failed */
} cora_status;

/** One argument: a scalar (is_scalar = 1, value in `scalar`) or an array of `count` elements. */
typedef struct cora_arg_t {
    const char *name;
    int32_t type_code;
    int32_t is_scalar;
    int64_t scalar;
    void *data;
    int64_t count;
} cora_arg_t;

typedef int32_t (*cora_entry_fn)(const cora_arg_t *args, int32_t nargs, char *error, int32_t error_size);

/** What the host entry of a GPU kernel (Target::Cuda) needs from the device runtime. Such an
 * entry has the signature
 *     int32_t entry(const cora_arg_t *args, int32_t nargs, const cora_device_t *device,
 *                   char *error, int32_t error_size);
 * its tensor arguments are device pointers, its length and aux arrays host pointers (the entry
 * checks them and sizes its launches from them); each call returns CORA_OK or fills `error`. */
typedef struct cora_device_t {
    void *context;
    /** Launch device kernel number `kernel` of the module (grid and threads: x, y, z); `params`
     * points at each parameter's value, in the kernel's order. */
    int32_t (*launch)(void *context, int32_t kernel, const int64_t *grid, const int64_t *threads, void **params,
                      char *error, int32_t error_size);
    /** `bytes` of device memory (an intermediate), or NULL with `error` filled. */
    void *(*alloc)(void *context, int64_t bytes, char *error, int32_t error_size);
    void (*release)(void *context, void *device_pointer);
    /** Makes the length and aux arrays the kernels read (`n` host arrays of `bytes` bytes each)
     * available on the device and writes their device addresses into `device_arrays`. The runtime
     * copies them all in one packed transfer, and none when their contents equal what it copied
     * last. The entry calls it before each launch, with the same arrays every time in one call. */
    int32_t (*stage_shape)(void *context, int32_t n, const void *const *host_arrays, const int64_t *bytes,
                           const void **device_arrays, char *error, int32_t error_size);
} cora_device_t;

typedef int32_t (*cora_device_entry_fn)(const cora_arg_t *args, int32_t nargs, const cora_device_t *device, char *error,
                                        int32_t error_size);

#ifdef __cplusplus
}
#endif

#endif /* CORA_RUNTIME_H */
