#include "driver/KernelCache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "util/Error.h"
#include "util/Hash.h"

namespace cora::driver {

namespace fs = std::filesystem;

namespace {

std::string octal_mode(mode_t m) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "%04o", (unsigned)(m & 07777));
    return buf;
}

/** Reads the whole file; false when it cannot be read. */
bool read_file(const fs::path &p, std::string &out) {
    std::ifstream f(p, std::ios::binary);
    if (!f) return false;
    std::ostringstream ss;
    ss << f.rdbuf();
    out = ss.str();
    return !f.bad();
}

std::string checksum_record(const std::string &key, const std::string &library_bytes) {
    return "cora-kernel-cache 1\n" + std::to_string(library_bytes.size()) + " " +
           util::content_hash(key + "\n" + library_bytes) + "\n";
}

std::string unique_suffix() {
    static std::atomic<uint64_t> counter{0};
    std::random_device rd;
    return std::to_string(getpid()) + "_" + std::to_string(counter++) + "_" + std::to_string(rd());
}

/** Creates `dir` and its missing parents; the last component gets mode 0700 (parents keep the
 * umask's default, as mkdir -p gives). */
void create_private_directory(const fs::path &dir) {
    std::error_code ec;
    if (dir.has_parent_path()) fs::create_directories(dir.parent_path(), ec);
    if (ec)
        throw EnvironmentError(
            concat("cora: cannot create kernel cache directory '", dir.parent_path().string(), "': ", ec.message()));
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
        throw EnvironmentError(
            concat("cora: cannot create kernel cache directory '", dir.string(), "': ", std::strerror(errno)));
}

} // namespace

void check_directory_trusted(const fs::path &dir) {
    const uid_t me = geteuid();
    struct stat st;
    if (stat(dir.c_str(), &st) != 0)
        throw EnvironmentError(
            concat("cora: cannot inspect kernel cache directory '", dir.string(), "': ", std::strerror(errno)));
    if (!S_ISDIR(st.st_mode))
        throw EnvironmentError(concat("cora: kernel cache '", dir.string(), "' is not a directory"));
    if (st.st_uid != me)
        throw EnvironmentError(concat("cora: kernel cache directory '", dir.string(), "' is owned by uid ", st.st_uid,
                                      ", not by this user (uid ", me,
                                      "); cora runs the code it finds there, so it only uses a directory of its own. "
                                      "Set CORA_CACHE_DIR to a directory you own."));
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        throw EnvironmentError(concat("cora: kernel cache directory '", dir.string(), "' is writable by ",
                                      (st.st_mode & S_IWOTH) ? "others" : "its group", " (mode ",
                                      octal_mode(st.st_mode),
                                      "); someone else could plant code that cora would run. Run: chmod go-w '",
                                      dir.string(), "', or set CORA_CACHE_DIR to a private directory."));
    // An ancestor that another user can write to lets that user replace the whole directory.
    fs::path abs = fs::absolute(dir).lexically_normal();
    for (fs::path p = abs.parent_path(); !p.empty(); p = p.parent_path()) {
        if (stat(p.c_str(), &st) != 0) break;
        bool foreign_owner = st.st_uid != me && st.st_uid != 0;
        bool shared_writable = (st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX);
        if (foreign_owner || shared_writable)
            throw EnvironmentError(concat(
                "cora: kernel cache directory '", dir.string(), "' lies inside '", p.string(), "', which ",
                foreign_owner ? concat("is owned by uid ", st.st_uid) : "is writable by others without the sticky bit",
                " (mode ", octal_mode(st.st_mode),
                "); its contents could be replaced. Set CORA_CACHE_DIR to a "
                "private directory."));
        if (p == p.root_path()) break;
    }
}

std::string default_cache_dir() {
    if (const char *d = std::getenv("CORA_CACHE_DIR"); d && *d) return d;
    if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/cora";
    if (const char *h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/cora";
    // No home: a directory of this user's own (created 0700 and checked), never a shared one.
    std::error_code ec;
    fs::path tmp = fs::temp_directory_path(ec);
    if (ec) tmp = "/tmp";
    return (tmp / ("cora-cache-" + std::to_string(geteuid()))).string();
}

KernelCache::KernelCache(fs::path dir) : dir_(std::move(dir)) {
    if (dir_.empty()) throw EnvironmentError("cora: the kernel cache directory name is empty");
    std::error_code ec;
    if (!fs::exists(dir_, ec)) create_private_directory(dir_);
    check_directory_trusted(dir_);
}

fs::path KernelCache::library_path(const std::string &key) const { return dir_ / ("k" + key + ".so"); }
fs::path KernelCache::sum_path(const std::string &key) const { return dir_ / ("k" + key + ".sum"); }
fs::path KernelCache::temp_path(const std::string &key, const std::string &suffix) const {
    return dir_ / ("k" + key + ".tmp" + unique_suffix() + suffix);
}

fs::path KernelCache::data_path(const std::string &key) const { return dir_ / ("k" + key + ".bin"); }

bool KernelCache::verified_file(const std::string &key, const fs::path &entry, std::string *bytes) const {
    std::string content, record;
    if (!read_file(entry, content) || !read_file(sum_path(key), record)) return false;
    if (record != checksum_record(key, content)) return false;
    if (bytes) *bytes = std::move(content);
    return true;
}

bool KernelCache::verified(const std::string &key) const { return verified_file(key, library_path(key), nullptr); }

void KernelCache::publish(const std::string &key, const fs::path &tmp) const {
    publish_file(key, tmp, library_path(key));
}

void KernelCache::publish_file(const std::string &key, const fs::path &tmp, const fs::path &entry) const {
    std::string bytes;
    if (!read_file(tmp, bytes))
        throw EnvironmentError(concat("cora: cannot read the compiled kernel '", tmp.string(), "'"));
    fs::path sum_tmp = temp_path(key, ".sum");
    {
        std::ofstream f(sum_tmp, std::ios::binary);
        f << checksum_record(key, bytes);
        f.close();
        if (!f) throw EnvironmentError(concat("cora: cannot write '", sum_tmp.string(), "' (is the disk full?)"));
    }
    // The checksum first: a reader that sees the new entry also sees its checksum. A concurrent
    // writer of the same key can interleave; a mismatch then only costs a recompile.
    std::error_code ec;
    fs::rename(sum_tmp, sum_path(key), ec);
    if (!ec) fs::rename(tmp, entry, ec);
    if (ec) {
        fs::remove(sum_tmp, ec);
        throw EnvironmentError(
            concat("cora: cannot move a kernel into the cache '", dir_.string(), "': ", ec.message()));
    }
}

std::optional<std::string> KernelCache::read_data(const std::string &key) const {
    std::string bytes;
    if (verified_file(key, data_path(key), &bytes)) return bytes;
    std::error_code ec;
    if (fs::exists(data_path(key), ec)) {
        fs::remove(data_path(key), ec);
        fs::remove(sum_path(key), ec);
    }
    return std::nullopt;
}

void KernelCache::write_data(const std::string &key, const std::string &bytes) const {
    fs::path tmp = temp_path(key, ".bin");
    {
        std::ofstream f(tmp, std::ios::binary);
        f << bytes;
        f.close();
        std::error_code ec;
        if (!f) {
            fs::remove(tmp, ec);
            throw EnvironmentError(concat("cora: cannot write '", tmp.string(), "' (is the disk full?)"));
        }
    }
    publish_file(key, tmp, data_path(key));
}

std::optional<std::string> KernelCache::read_note(const std::string &name) const {
    std::string text;
    if (!read_file(dir_ / (name + ".note"), text) || text.empty()) return std::nullopt;
    return text;
}

void KernelCache::write_note(const std::string &name, const std::string &text) const {
    fs::path tmp = temp_path(name, ".note");
    std::ofstream f(tmp, std::ios::binary);
    f << text;
    f.close();
    std::error_code ec;
    if (f) fs::rename(tmp, dir_ / (name + ".note"), ec);
    if (!f || ec) fs::remove(tmp, ec);
}

void KernelCache::evict(const std::string &key) const {
    std::error_code ec;
    fs::remove(library_path(key), ec);
    fs::remove(sum_path(key), ec);
}

} // namespace cora::driver
