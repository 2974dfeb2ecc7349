/** \file Readers of the apps' data files, strict: a value that is not an integer, out of range, or
 * missing is a UsageError naming the file and line. (Fuzzed by tests/fuzz/fuzz_data_files.cpp.)
 *   - length files: integers separated by white space, any number per line (the format of
 *     the datasets' *_lengths.txt files), each in [min, max]; the first `count` are used;
 *   - GEMM shape files: one "M N K" per line (../shared/datasets/vbatch_gemm_data*.txt), each
 *     in [0, max_dim]; blank lines are skipped; lines `start` .. `start + count - 1` are used.
 * Limits, so that an endless or binary input (`--lengths /dev/zero`, a pipe that never ends) stops
 * with an error instead of growing memory or reading forever: a line holds at most
 * kMaxLineBytes (16 MiB), and a reader reads at most kMaxInputBytes (1 GiB) of a file. */
#pragma once

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <istream>
#include <sstream>
#include <string>
#include <vector>

#include "common/cli.h"

namespace cora::apps {

constexpr int64_t kMaxLineBytes = int64_t(16) << 20;
constexpr int64_t kMaxInputBytes = int64_t(1) << 30;

namespace detail {

/** std::getline with the limits above: false at the end of `in`; UsageError naming `source` and
 * the line when a line or the whole input is too long. `total` counts the bytes read so far. */
inline bool read_line(std::istream &in, std::string &line, const std::string &source, int64_t line_no,
                      int64_t &total) {
    line.clear();
    bool any = false;
    for (int c = in.get(); c != std::char_traits<char>::eof(); c = in.get()) {
        any = true;
        if (++total > kMaxInputBytes)
            throw UsageError(source + ": longer than " + std::to_string(kMaxInputBytes >> 20) +
                             " MiB, the limit of a data file");
        if (c == '\n') return true;
        if ((int64_t)line.size() >= kMaxLineBytes)
            throw UsageError(source + ":" + std::to_string(line_no) + ": a line longer than " +
                             std::to_string(kMaxLineBytes >> 20) + " MiB, the limit of a data file's line");
        line.push_back((char)c);
    }
    return any;
}

/** `token` for a message: bytes that are not printable (a NUL, a control character) as \xNN. */
inline std::string printable(const std::string &token) {
    std::string out;
    for (unsigned char c : token) {
        if (c >= 0x20 && c < 0x7f) {
            out += (char)c;
        } else {
            char hex[8];
            std::snprintf(hex, sizeof hex, "\\x%02x", c);
            out += hex;
        }
    }
    return out;
}

/** The integer `token` in [min, max], or a UsageError at `where`. */
inline int64_t parse_value(const std::string &token, int64_t min, int64_t max, const std::string &where) {
    int64_t v = 0;
    if (!parse_int64(token, &v)) throw UsageError(where + ": '" + printable(token) + "' is not an integer");
    if (v < min || v > max)
        throw UsageError(where + ": " + token + " is outside [" + std::to_string(min) + ", " + std::to_string(max) +
                         "]");
    return v;
}

inline std::ifstream open_or_throw(const std::string &path, const char *what) {
    std::ifstream f(path);
    if (!f) throw UsageError(std::string("cannot read ") + what + " '" + path + "': " + std::strerror(errno));
    return f;
}

} // namespace detail

/** The first `count` lengths of `in` (named `source` in messages). */
inline std::vector<int32_t> parse_lengths(std::istream &in, const std::string &source, int64_t count, int32_t min,
                                          int32_t max) {
    std::vector<int32_t> out;
    std::string line;
    int64_t total = 0;
    for (int64_t line_no = 1; (int64_t)out.size() < count && detail::read_line(in, line, source, line_no, total);
         line_no++) {
        std::istringstream words(line);
        std::string token;
        while ((int64_t)out.size() < count && words >> token)
            out.push_back((int32_t)detail::parse_value(token, min, max, source + ":" + std::to_string(line_no)));
    }
    if ((int64_t)out.size() < count)
        throw UsageError(source + " holds " + std::to_string(out.size()) + " lengths; " + std::to_string(count) +
                         " are needed");
    return out;
}

inline std::vector<int32_t> read_length_file(const std::string &path, int64_t count, int32_t min, int32_t max) {
    std::ifstream f = detail::open_or_throw(path, "lengths file");
    return parse_lengths(f, path, count, min, max);
}

using GemmShape = std::array<int32_t, 3>; ///< M, N, K

/** Shapes from lines `start` .. `start + count - 1` (counting non-blank lines from 0) of `in`. */
inline std::vector<GemmShape> parse_gemm_shapes(std::istream &in, const std::string &source, int64_t count,
                                                int64_t start, int32_t max_dim) {
    std::vector<GemmShape> out;
    std::string line;
    int64_t entry = 0, total = 0;
    for (int64_t line_no = 1; (int64_t)out.size() < count && detail::read_line(in, line, source, line_no, total);
         line_no++) {
        std::istringstream words(line);
        std::vector<std::string> tokens;
        for (std::string t; words >> t;)
            tokens.push_back(t);
        if (tokens.empty()) continue;
        std::string where = source + ":" + std::to_string(line_no);
        if (tokens.size() != 3)
            throw UsageError(where + ": expected three integers \"M N K\", got " + std::to_string(tokens.size()) +
                             " fields");
        GemmShape s;
        for (int k = 0; k < 3; k++)
            s[(size_t)k] = (int32_t)detail::parse_value(tokens[(size_t)k], 0, max_dim, where);
        if (entry++ >= start) out.push_back(s);
    }
    if ((int64_t)out.size() < count)
        throw UsageError(source + " holds " + std::to_string(out.size()) + " shapes after line " +
                         std::to_string(start) + "; " + std::to_string(count) + " are needed");
    return out;
}

inline std::vector<GemmShape> read_gemm_shape_file(const std::string &path, int64_t count, int64_t start,
                                                   int32_t max_dim) {
    std::ifstream f = detail::open_or_throw(path, "GEMM shapes file");
    return parse_gemm_shapes(f, path, count, start, max_dim);
}

} // namespace cora::apps
