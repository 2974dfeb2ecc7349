/* cora_runtime.h: the C ABI between libcora (or a user) and generated kernels.
 *
 * A generated entry point has the signature
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

#ifdef __cplusplus
}
#endif

#endif /* CORA_RUNTIME_H */
