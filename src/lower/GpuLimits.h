/** \file A GPU's launch limits, a lowering input the backend supplies. */
#pragma once

#include <cstdint>

namespace cora::ir {

/** The launch limits of the GPU a kernel is lowered for: the backend "cuda" reads them from its
 * device (cuDeviceGetAttribute); the emulators assume those every NVIDIA GPU since Kepler has.
 * Static shared memory is 48 KiB per block on every architecture (more needs dynamic shared
 * memory and an opt-in), so it is not read from the device. */
struct GpuLimits {
    int64_t max_threads_per_block = 1024;
    int64_t max_block[3] = {1024, 1024, 64};
    int64_t max_grid[3] = {2147483647, 65535, 65535};
    int64_t max_static_shared_bytes = 48 * 1024;
};

} // namespace cora::ir
