/* Times cblas_sgemm on one core for the kernel OpenBLAS runs (OPENBLAS_CORETYPE, read when the
 * library loads) and checks its result against a double-precision product: bench/common.sh runs it
 * once per candidate kernel and keeps the fastest that is correct.
 * Prints one line: "<kernel reported by OpenBLAS> <GFLOP/s> <max relative error>". */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

char *openblas_get_corename(void);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    const int n = argc > 1 ? atoi(argv[1]) : 768;
    if (n < 16 || n > 4096) {
        fprintf(stderr, "openblas_core_probe: size must be in [16, 4096], got %d\n", n);
        return 2;
    }
    float *a = malloc(sizeof(float) * (size_t)n * n), *b = malloc(sizeof(float) * (size_t)n * n),
          *c = malloc(sizeof(float) * (size_t)n * n);
    if (!a || !b || !c) return 1;
    unsigned s = 12345;
    for (long i = 0; i < (long)n * n; i++) {
        s = s * 1103515245u + 12345u;
        a[i] = (float)((s >> 8) % 2001) / 1000.0f - 1.0f;
        s = s * 1103515245u + 12345u;
        b[i] = (float)((s >> 8) % 2001) / 1000.0f - 1.0f;
    }
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double t = now() - t0;
        if (t < best) best = t;
    }
    /* 64 entries against a double-precision dot product; NaN counts as an error. */
    double worst = 0;
    for (int k = 0; k < 64; k++) {
        const int i = (k * 37) % n, j = (k * 101 + 7) % n;
        double want = 0;
        for (int l = 0; l < n; l++)
            want += (double)a[(long)i * n + l] * b[(long)l * n + j];
        const double err = fabs(c[(long)i * n + j] - want) / fmax(1.0, fabs(want));
        if (!(err <= worst)) worst = isnan(err) ? INFINITY : err;
    }
    printf("%s %.1f %.3g\n", openblas_get_corename(), 2.0 * n * n * (double)n / best * 1e-9, worst);
    free(a);
    free(b);
    free(c);
    return 0;
}
