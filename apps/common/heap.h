/** \file Keep freed memory in the process for the next kernel call.
 *
 * cora's kernels allocate their intermediates on every call (malloc, then free at the end). glibc
 * serves every block above its mmap threshold (at most 32 MB) with a fresh mmap and unmaps it on
 * free, so each call takes a page fault and a kernel page clear for every 4 KB of every large
 * intermediate again: the attention scores of a batch of 128 RACE sequences are 0.6 GB per
 * layer, and clearing pages was 27% of the encoder's time (perf, `clear_page_erms`). Serving
 * large blocks from the heap and never trimming it lets the next call reuse the same pages.
 * This is a process-wide allocator setting, so only a program (not the library) makes it. */
#pragma once

#include <malloc.h>

namespace cora::apps {

/** Make glibc keep freed blocks for reuse (no mmap for large blocks, no trimming of the heap's
 * top). Equivalent to MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=2147483647 in the environment,
 * which bench/encoder.sh sets for the PyTorch baselines too. */
inline void keep_freed_memory() {
#ifdef __GLIBC__
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, 2147483647);
#endif
}

} // namespace cora::apps
