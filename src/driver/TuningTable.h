/** \file The tuning table: the register tile measured fastest per key (cora/Tune.h), kept in a
 * text file that is checked whole before any entry is trusted. */
#pragma once

#include <map>
#include <string>

#include "cora/ContractionTile.h"

namespace cora::driver {

struct TuningEntry {
    ContractionTile tile;
    double ms = 0; ///< the winner's time when measured (for the report)
};

/** Format: a header line "cora-tuning-table 1", one line per entry "key<TAB>tiled rows vectors
 * panel ms", and a last line "end <entries> <hash>", the hash covering every line before it. A
 * missing file is an empty table; anything else that does not read back exactly (a truncated
 * write, an edited line, another version) is corrupt. */
class TuningTable {
public:
    /** Reads `path`. A missing file gives an empty table and no problem; a corrupt one an empty
     * table and `*problem` saying what is wrong. */
    static TuningTable load(const std::string &path, std::string *problem);
    /** Writes the table atomically (a temporary file renamed over `path`), creating its directory.
     * RuntimeError naming the path when it cannot. */
    void save(const std::string &path) const;
    const TuningEntry *find(const std::string &key) const;
    void set(const std::string &key, const TuningEntry &e) { entries_[key] = e; }
    size_t size() const { return entries_.size(); }

private:
    std::map<std::string, TuningEntry> entries_;
};

} // namespace cora::driver
