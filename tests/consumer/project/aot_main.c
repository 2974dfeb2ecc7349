/* Plain C against the generated header: sizes from the library, one call, a check by hand. */
#include <stdio.h>
#include <stdlib.h>

#include "ragged_scale.h"

int main(void) {
    int32_t len[3] = {5, 0, 17};
    int64_t sizes[ragged_scale_tensor_count];
    char error[256];
    if (ragged_scale_buffer_sizes(3, len, 3, sizes, error, sizeof error) != 0) {
        fprintf(stderr, "sizes: %s\n", error);
        return 1;
    }
    int64_t n = sizes[ragged_scale_size_Out];
    if (n != 22 || sizes[ragged_scale_size_A] != 22) {
        fprintf(stderr, "unexpected sizes %lld %lld\n", (long long)sizes[ragged_scale_size_A], (long long)n);
        return 1;
    }
    float *a = malloc(sizeof(float) * n), *out = malloc(sizeof(float) * n);
    for (int64_t i = 0; i < n; i++)
        a[i] = (float)i;
    if (ragged_scale(3, len, 3, a, n, out, n, error, sizeof error) != 0) {
        fprintf(stderr, "run: %s\n", error);
        return 1;
    }
    int64_t at = 0;
    for (int b = 0; b < 3; b++)
        for (int s = 0; s < len[b]; s++, at++)
            if (out[at] != 3.0f * a[at] + (float)b) {
                fprintf(stderr, "Out[%d, %d] = %g, expected %g\n", b, s, out[at], 3.0f * a[at] + (float)b);
                return 1;
            }
    /* A wrong size is refused with a message, and nothing is written. */
    out[0] = -1.0f;
    if (ragged_scale(3, len, 3, a, n, out, n - 1, error, sizeof error) == 0 || out[0] != -1.0f) {
        fprintf(stderr, "a short output buffer was accepted\n");
        return 1;
    }
    printf("aot consumer: %lld elements correct; bad size refused: %s\n", (long long)n, error);
    free(a);
    free(out);
    return 0;
}
