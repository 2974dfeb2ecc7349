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
    CORA_TYPE_FLOAT16 = 5, /* IEEE binary16, held as uint16_t bits */
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

/** float16 tensors hold IEEE binary16 bits (uint16_t). These are the conversions kernels use on
 * the CPU (on a GPU: the cvt instruction, with the same results): widening is exact; narrowing
 * rounds to the nearest binary16, ties to even, overflowing to infinity; NaN stays NaN. */
static inline float cora_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (uint32_t)(h >> 10) & 0x1fu, m = (uint32_t)h & 0x3ffu, x;
    float f;
    if (e == 0x1fu) {
        x = sign | 0x7f800000u | (m << 13); /* infinity or NaN */
    } else if (e != 0) {
        x = sign | ((e + 112u) << 23) | (m << 13);
    } else if (m == 0) {
        x = sign;
    } else { /* subnormal: m * 2^-24, normalised */
        e = 113u;
        while (!(m & 0x400u)) {
            m <<= 1;
            e--;
        }
        x = sign | (e << 23) | ((m & 0x3ffu) << 13);
    }
    __builtin_memcpy(&f, &x, sizeof f);
    return f;
}
static inline uint16_t cora_float_to_half(float f) {
    uint32_t x, ax, sign, out, rem, halfway;
    __builtin_memcpy(&x, &f, sizeof x);
    sign = (x >> 16) & 0x8000u;
    ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN (quiet) */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to infinity */
    if (ax < 0x38800000u) {                                   /* below 2^-14: subnormal or zero */
        uint32_t shift, m;
        if (ax < 0x33000000u) return (uint16_t)sign; /* below 2^-25 (2^-25 itself ties to 0) */
        shift = 126u - (ax >> 23);                   /* 14..24: in units of 2^-24 the value is m >> shift */
        m = (ax & 0x7fffffu) | 0x800000u;
        out = m >> shift;
        rem = m & ((1u << shift) - 1u);
        halfway = 1u << (shift - 1u);
    } else {
        ax -= 0x38000000u; /* rebias the exponent: 127 -> 15 */
        out = ax >> 13;
        rem = ax & 0x1fffu;
        halfway = 0x1000u;
    }
    if (rem > halfway || (rem == halfway && (out & 1u))) out++; /* a carry into the exponent is right */
    return (uint16_t)(sign | out);
}

typedef int32_t (*cora_device_entry_fn)(const cora_arg_t *args, int32_t nargs, const cora_device_t *device, char *error,
                                        int32_t error_size);

#ifdef __cplusplus
}
#endif

#endif /* CORA_RUNTIME_H */
