/** \file The on-disk kernel cache: a private directory of compiled kernels, each with a checksum.
 *
 * Trust model. Loading a cached kernel runs its code in the caller's process, so the cache
 * directory must be writable by its owner only:
 *   - the directory is created with mode 0700; an existing one must be owned by the effective
 *     user and not writable by group or others, and each of its ancestors must be owned by that
 *     user or root and be writable by nobody else unless sticky (as /tmp is) — else
 *     EnvironmentError, saying how to fix it;
 *   - the default without HOME is a per-user directory, $TMPDIR/cora-cache-<uid>, never a shared one.
 * Entries are compiled libraries (k<key>.so) or data (k<key>.bin: device code, see CudaProgram.cpp).
 * Integrity. Each entry k<key>.so or k<key>.bin has a sidecar k<key>.sum with its size and content hash (keyed
 * by the entry's key). An entry is loaded only when the two match; a truncated, corrupted or
 * replaced file is removed and compiled again. The checksum detects accidents and tools that do
 * not know it; it is not a signature — against people, the directory's permissions protect.
 * Entries are published atomically (temp file + rename), so concurrent writers never expose a
 * partial file.
 * Reading. Every file is opened without following a symbolic link and read only when it is a
 * regular file no larger than its kind's limit (a checksum 4 KiB, a note 64 KiB, an entry 1 GiB):
 * a `.sum` linked to /dev/zero or a `.so` replaced by a FIFO is a mismatch (recompiled), never an
 * endless read or a hang. The cache holds a descriptor of the directory it checked, and reads and
 * loads entries through it (openat, and dlopen of /proc/self/fd/<dir>/k<key>.so): whatever happens
 * to the directory's path after the check, the code loaded comes from the directory checked, where
 * no other user can write. (Not /proc/self/fd/<file>: the loader matches names of loaded objects,
 * and a file descriptor's number is reused; the key in the name makes a match mean the same kernel.)
 * Temporaries. A compile works in a scratch directory of its own inside the cache (its source, the
 * compiler's temporary objects through TMPDIR, the library until it is published), removed when
 * the compile ends, failed or not; scratch files a killed process left behind (its pid is in their
 * name) are swept by the next compile. */
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cora::driver {

/** A library entry whose checksum matched, for loading: a descriptor of the cache directory it was
 * read from and its name there. */
class VerifiedEntry {
public:
    VerifiedEntry(int dir_fd, std::string name, std::filesystem::path path)
        : dir_fd_(dir_fd), name_(std::move(name)), path_(std::move(path)) {}
    VerifiedEntry(VerifiedEntry &&o) noexcept : dir_fd_(o.dir_fd_), name_(std::move(o.name_)), path_(std::move(o.path_)) {
        o.dir_fd_ = -1;
    }
    VerifiedEntry(const VerifiedEntry &) = delete;
    VerifiedEntry &operator=(const VerifiedEntry &) = delete;
    ~VerifiedEntry();
    /** What dlopen should open: /proc/self/fd/<dir>/<name> (in the directory checked) where /proc is
     * mounted, else the entry's path. */
    std::string load_path() const;
    /** The entry's path in the cache, for messages. */
    const std::filesystem::path &path() const { return path_; }

private:
    int dir_fd_;
    std::string name_;
    std::filesystem::path path_;
};

/** A private directory for one compile's temporary files, removed with everything in it when the
 * object goes out of scope unless keep() was called. */
class ScratchDirectory {
public:
    explicit ScratchDirectory(std::filesystem::path dir) : dir_(std::move(dir)) {}
    ScratchDirectory(const ScratchDirectory &) = delete;
    ScratchDirectory &operator=(const ScratchDirectory &) = delete;
    ~ScratchDirectory();
    const std::filesystem::path &path() const { return dir_; }
    /** Leaves the directory in place (CORA_DEBUG=2: the source of a failed compile stays readable). */
    void keep() { kept_ = true; }

private:
    std::filesystem::path dir_;
    bool kept_ = false;
};

class KernelCache {
public:
    /** Opens (creating when missing) the cache at `dir`; EnvironmentError when it cannot be created
     * or must not be trusted. */
    explicit KernelCache(std::filesystem::path dir);
    ~KernelCache();
    KernelCache(const KernelCache &) = delete;
    KernelCache &operator=(const KernelCache &) = delete;

    const std::filesystem::path &dir() const { return dir_; }
    std::filesystem::path library_path(const std::string &key) const;
    /** A path in the cache for a temporary file of this process (unique per call). */
    std::filesystem::path temp_path(const std::string &key, const std::string &suffix) const;

    /** Whether entry `key` exists and matches its checksum. */
    bool verified(const std::string &key) const;
    /** Library entry `key` opened, when it exists and matches its checksum (see above). */
    std::optional<VerifiedEntry> open_verified(const std::string &key) const;
    /** A new scratch directory for a compile of `key` (mode 0700, inside the cache). */
    std::unique_ptr<ScratchDirectory> scratch(const std::string &key) const;
    /** Removes the temporaries of compiles that cannot finish any more: those whose process has
     * exited (killed mid-compile), and any older than a day. Returns how many it removed. */
    int sweep_stale_temporaries() const;
    /** Moves the compiled library `tmp` into the cache as entry `key`, with its checksum. */
    void publish(const std::string &key, const std::filesystem::path &tmp) const;
    /** Removes entry `key` (library and checksum); missing files are not an error. */
    void evict(const std::string &key) const;

    /** The bytes of data entry `key` (compiled device code, e.g. a cubin) when it exists and matches
     * its checksum; nullopt otherwise (a mismatching entry is removed). */
    std::optional<std::string> read_data(const std::string &key) const;
    /** Keeps `bytes` as data entry `key`, with its checksum, published atomically. */
    void write_data(const std::string &key, const std::string &bytes) const;

    /** A small text the cache keeps under `name` (e.g. a compiler's version line), or nullopt. */
    std::optional<std::string> read_note(const std::string &name) const;
    /** Keeps `text` under `name`, published atomically; failures are ignored (a note is only a
     * shortcut). */
    void write_note(const std::string &name, const std::string &text) const;

private:
    std::filesystem::path sum_path(const std::string &key) const;
    std::filesystem::path data_path(const std::string &key) const;
    bool verified_file(const std::string &key, const std::filesystem::path &entry, std::string *bytes) const;
    void publish_file(const std::string &key, const std::filesystem::path &tmp,
                      const std::filesystem::path &entry) const;
    std::filesystem::path dir_;
    int dir_fd_ = -1; ///< the directory checked (see above)
};

/** The default cache directory: CORA_CACHE_DIR, else $XDG_CACHE_HOME/cora, else ~/.cache/cora,
 * else fallback_cache_dir(). */
std::string default_cache_dir();

/** The cache directory without HOME: $TMPDIR/cora-cache-<uid> (per user). In a shared directory
 * such as /tmp, so it must be a real directory (checked with lstat: a symbolic link someone
 * planted there is never followed). */
std::string fallback_cache_dir();

/** Checks that `dir` (an existing directory) may hold code this process runs; EnvironmentError
 * naming the offending directory and the fix otherwise. */
void check_directory_trusted(const std::filesystem::path &dir);

} // namespace cora::driver
