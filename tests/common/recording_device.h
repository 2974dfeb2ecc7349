// A cora_device_t that records what a CUDA host entry asks of it, for tests of the host side of
// Target::Cuda without a GPU (the entry JIT-compiled from CudaProgram::host_source).
#pragma once

#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

#include "cora_runtime.h"

namespace cora::testing {

/** A cora_device_t that records what the host entry asks of it (no GPU needed). */
struct RecordingDevice {
    struct Launch {
        int32_t kernel;
        std::array<int64_t, 3> grid, threads;
    };
    std::vector<Launch> launches;
    std::map<const void *, int64_t> staged; ///< host array -> bytes
    int stage_calls = 0, allocs = 0, releases = 0;
    bool fail_launch = false, fail_stage = false;
    cora_device_t device{this, &launch, &alloc, &release, &stage_shape};

    static int32_t launch(void *c, int32_t kernel, const int64_t *grid, const int64_t *threads, void **, char *error,
                          int32_t error_size) {
        auto *r = static_cast<RecordingDevice *>(c);
        if (r->fail_launch) {
            std::snprintf(error, (size_t)error_size, "launch refused");
            return 3;
        }
        r->launches.push_back({kernel, {grid[0], grid[1], grid[2]}, {threads[0], threads[1], threads[2]}});
        return 0;
    }
    static void *alloc(void *c, int64_t bytes, char *, int32_t) {
        static_cast<RecordingDevice *>(c)->allocs++;
        return std::malloc((size_t)bytes);
    }
    static void release(void *c, void *p) {
        static_cast<RecordingDevice *>(c)->releases++;
        std::free(p);
    }
    static int32_t stage_shape(void *c, int32_t n, const void *const *host, const int64_t *bytes, const void **device,
                               char *error, int32_t error_size) {
        auto *r = static_cast<RecordingDevice *>(c);
        if (r->fail_stage) {
            std::snprintf(error, (size_t)error_size, "no room for the shape");
            return 3;
        }
        r->stage_calls++;
        for (int32_t i = 0; i < n; i++) {
            r->staged[host[i]] = bytes[i];
            device[i] = host[i];
        }
        return 0;
    }
};

} // namespace cora::testing
