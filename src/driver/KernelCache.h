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
 * partial file. */
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace cora::driver {

class KernelCache {
public:
    /** Opens (creating when missing) the cache at `dir`; EnvironmentError when it cannot be created
     * or must not be trusted. */
    explicit KernelCache(std::filesystem::path dir);

    const std::filesystem::path &dir() const { return dir_; }
    std::filesystem::path library_path(const std::string &key) const;
    /** A path in the cache for a temporary file of this process (unique per call). */
    std::filesystem::path temp_path(const std::string &key, const std::string &suffix) const;

    /** Whether entry `key` exists and matches its checksum. */
    bool verified(const std::string &key) const;
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
};

/** The default cache directory: CORA_CACHE_DIR, else $XDG_CACHE_HOME/cora, else ~/.cache/cora,
 * else $TMPDIR/cora-cache-<uid> (per user). */
std::string default_cache_dir();

/** Checks that `dir` (an existing directory) may hold code this process runs; EnvironmentError
 * naming the offending directory and the fix otherwise. */
void check_directory_trusted(const std::filesystem::path &dir);

} // namespace cora::driver
