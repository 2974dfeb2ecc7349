#include "driver/KernelCache.h"

#include <fcntl.h>
#include <signal.h>
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

constexpr int64_t kMaxChecksumBytes = 4 << 10, kMaxNoteBytes = 64 << 10, kMaxEntryBytes = int64_t(1) << 30;

/** A file descriptor closed when it goes out of scope. */
struct Descriptor {
    int fd = -1;
    ~Descriptor() {
        if (fd >= 0) close(fd);
    }
    int release() {
        int f = fd;
        fd = -1;
        return f;
    }
};

/** Opens `p` (relative to directory `dir_fd`, or AT_FDCWD) for reading when it is a regular file
 * (not a link: O_NOFOLLOW; not a FIFO or device: O_NONBLOCK so that opening one does not wait,
 * then fstat) of at most `max_bytes`; -1 otherwise. */
int open_regular_at(int dir_fd, const fs::path &p, int64_t max_bytes, int64_t *size) {
    Descriptor d{openat(dir_fd, p.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)};
    if (d.fd < 0) return -1;
    struct stat st;
    if (fstat(d.fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > max_bytes) return -1;
    *size = st.st_size;
    return d.release();
}

/** Reads `size` bytes of `fd` from its start; false on a short or failed read. */
bool read_all(int fd, int64_t size, std::string &out) {
    out.resize((size_t)size);
    int64_t done = 0;
    while (done < size) {
        ssize_t n = pread(fd, out.data() + done, (size_t)(size - done), done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        done += n;
    }
    return true;
}

/** The whole of regular file `p` when it holds at most `max_bytes`; false otherwise (see above). */
bool read_file(const fs::path &p, int64_t max_bytes, std::string &out) {
    int64_t size = 0;
    Descriptor d{open_regular_at(AT_FDCWD, p, max_bytes, &size)};
    return d.fd >= 0 && read_all(d.fd, size, out);
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

std::string fallback_cache_dir() {
    // No home: a directory of this user's own (created 0700 and checked), never a shared one.
    std::error_code ec;
    fs::path tmp = fs::temp_directory_path(ec);
    if (ec) tmp = "/tmp";
    return (tmp / ("cora-cache-" + std::to_string(geteuid()))).string();
}

std::string default_cache_dir() {
    if (const char *d = std::getenv("CORA_CACHE_DIR"); d && *d) return d;
    if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/cora";
    if (const char *h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/cora";
    return fallback_cache_dir();
}

KernelCache::KernelCache(fs::path dir) : dir_(std::move(dir)) {
    if (dir_.empty()) throw EnvironmentError("cora: the kernel cache directory name is empty");
    struct stat st;
    if (lstat(dir_.c_str(), &st) != 0) {
        create_private_directory(dir_);
    } else if (S_ISLNK(st.st_mode) && dir_ == fs::path(fallback_cache_dir())) {
        // In a shared directory (/tmp) anyone may have made this name a link to a directory of
        // their choosing: cora made this directory itself, so a link here was planted.
        throw EnvironmentError(concat("cora: kernel cache directory '", dir_.string(),
                                      "' is a symbolic link (owned by uid ", st.st_uid,
                                      "), not the directory cora creates there; remove it, or set HOME or "
                                      "CORA_CACHE_DIR to a private directory."));
    }
    check_directory_trusted(dir_);
    // The descriptor of what was checked; its owner and mode checked again through it, so the path
    // cannot have moved between the check and the open.
    dir_fd_ = open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat fst;
    if (dir_fd_ < 0 || fstat(dir_fd_, &fst) != 0 || fst.st_uid != geteuid() || (fst.st_mode & (S_IWGRP | S_IWOTH))) {
        if (dir_fd_ >= 0) close(dir_fd_);
        throw EnvironmentError(concat("cora: kernel cache directory '", dir_.string(),
                                      "' changed while cora was checking it; set CORA_CACHE_DIR to a private "
                                      "directory."));
    }
}

KernelCache::~KernelCache() {
    if (dir_fd_ >= 0) close(dir_fd_);
}

VerifiedEntry::~VerifiedEntry() {
    if (dir_fd_ >= 0) close(dir_fd_);
}

std::string VerifiedEntry::load_path() const {
    // The magic link is the directory checked; without /proc the path is all there is.
    static const bool proc = access("/proc/self/fd", X_OK) == 0;
    return proc ? "/proc/self/fd/" + std::to_string(dir_fd_) + "/" + name_ : path_.string();
}

ScratchDirectory::~ScratchDirectory() {
    if (kept_) return;
    std::error_code ec;
    fs::remove_all(dir_, ec);
}

fs::path KernelCache::library_path(const std::string &key) const { return dir_ / ("k" + key + ".so"); }
fs::path KernelCache::sum_path(const std::string &key) const { return dir_ / ("k" + key + ".sum"); }
fs::path KernelCache::temp_path(const std::string &key, const std::string &suffix) const {
    return dir_ / ("k" + key + ".tmp" + unique_suffix() + suffix);
}

fs::path KernelCache::data_path(const std::string &key) const { return dir_ / ("k" + key + ".bin"); }

bool KernelCache::verified_file(const std::string &key, const fs::path &entry, std::string *bytes) const {
    std::string content, record;
    if (!read_file(entry, kMaxEntryBytes, content) || !read_file(sum_path(key), kMaxChecksumBytes, record))
        return false;
    if (record != checksum_record(key, content)) return false;
    if (bytes) *bytes = std::move(content);
    return true;
}

bool KernelCache::verified(const std::string &key) const { return open_verified(key).has_value(); }

std::optional<VerifiedEntry> KernelCache::open_verified(const std::string &key) const {
    const std::string name = library_path(key).filename().string(), sum = sum_path(key).filename().string();
    int64_t size = 0, sum_size = 0;
    Descriptor lib{open_regular_at(dir_fd_, name, kMaxEntryBytes, &size)};
    Descriptor record_fd{open_regular_at(dir_fd_, sum, kMaxChecksumBytes, &sum_size)};
    std::string content, record;
    if (lib.fd < 0 || record_fd.fd < 0 || !read_all(lib.fd, size, content) || !read_all(record_fd.fd, sum_size, record) ||
        record != checksum_record(key, content))
        return std::nullopt;
    Descriptor dir{fcntl(dir_fd_, F_DUPFD_CLOEXEC, 0)};
    if (dir.fd < 0)
        throw EnvironmentError(concat("cora: cannot duplicate a descriptor of the kernel cache: ", std::strerror(errno)));
    return VerifiedEntry(dir.release(), name, library_path(key));
}

std::unique_ptr<ScratchDirectory> KernelCache::scratch(const std::string &key) const {
    fs::path dir = temp_path(key, ".d");
    if (mkdir(dir.c_str(), 0700) != 0)
        throw EnvironmentError(concat("cora: cannot create a scratch directory '", dir.string(),
                                      "' in the kernel cache: ", std::strerror(errno)));
    return std::make_unique<ScratchDirectory>(dir);
}

int KernelCache::sweep_stale_temporaries() const {
    // Temporaries are named k<key>.tmp<pid>_<counter>_<random><suffix> (temp_path).
    int removed = 0;
    std::error_code ec;
    const auto now = fs::file_time_type::clock::now();
    for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        const size_t at = name.find(".tmp");
        if (name.empty() || name[0] != 'k' || at == std::string::npos) continue;
        const long pid = std::strtol(name.c_str() + at + 4, nullptr, 10);
        const bool exited = pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
        std::error_code tec;
        const auto written = fs::symlink_status(it->path(), tec).type() == fs::file_type::not_found
                                 ? now
                                 : fs::last_write_time(it->path(), tec);
        const auto age = now - written;
        // A pid that has exited leaves its files for good; the two minutes spare a live compile of
        // another PID namespace sharing the cache (its pid means nothing here).
        const bool stale = !tec && ((exited && age > std::chrono::minutes(2)) || age > std::chrono::hours(24));
        if (!stale) continue;
        std::error_code rec;
        if (fs::remove_all(it->path(), rec) > 0) removed++;
    }
    return removed;
}

void KernelCache::publish(const std::string &key, const fs::path &tmp) const {
    publish_file(key, tmp, library_path(key));
}

void KernelCache::publish_file(const std::string &key, const fs::path &tmp, const fs::path &entry) const {
    std::string bytes;
    if (!read_file(tmp, kMaxEntryBytes, bytes))
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
    if (!read_file(dir_ / (name + ".note"), kMaxNoteBytes, text) || text.empty()) return std::nullopt;
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
