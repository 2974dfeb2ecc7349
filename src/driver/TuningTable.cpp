/** \file The tuning table's file: read whole and checked, written atomically. */
#include "driver/TuningTable.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "cora/Error.h"
#include "util/Hash.h"

namespace cora::driver {

namespace {

constexpr const char *kHeader = "cora-tuning-table 1";

std::string entry_line(const std::string &key, const TuningEntry &e) {
    std::ostringstream s;
    s.precision(6);
    s << key << '\t' << (e.tile.tiled ? 1 : 0) << ' ' << e.tile.rows << ' ' << e.tile.vectors << ' ' << e.tile.panel
      << ' ' << e.ms;
    return s.str();
}

} // namespace

TuningTable TuningTable::load(const std::string &path, std::string *problem) {
    problem->clear();
    TuningTable table;
    std::ifstream in(path);
    if (!in) {
        if (std::filesystem::exists(path)) *problem = "cannot be read";
        return table;
    }
    std::string line, covered;
    auto corrupt = [&](const std::string &why) {
        *problem = why;
        return TuningTable();
    };
    if (!std::getline(in, line) || line != kHeader)
        return corrupt("its first line is not '" + std::string(kHeader) + "'");
    covered = line + "\n";
    while (std::getline(in, line)) {
        if (line.rfind("end ", 0) == 0) {
            std::istringstream end(line.substr(4));
            size_t count = 0;
            std::string hash, extra;
            if (!(end >> count >> hash) || (end >> extra)) return corrupt("its end line is malformed");
            if (count != table.entries_.size()) return corrupt("its end line counts a different number of entries");
            if (hash != util::content_hash(covered)) return corrupt("its contents do not match their hash");
            if (std::getline(in, line)) return corrupt("it has lines after its end line");
            return table;
        }
        size_t tab = line.find('\t');
        if (tab == std::string::npos || tab == 0) return corrupt("an entry has no key");
        std::istringstream fields(line.substr(tab + 1));
        int tiled = -1;
        TuningEntry e;
        std::string extra;
        if (!(fields >> tiled >> e.tile.rows >> e.tile.vectors >> e.tile.panel >> e.ms) || (fields >> extra) ||
            (tiled != 0 && tiled != 1))
            return corrupt("an entry is malformed: '" + line + "'");
        e.tile.tiled = tiled == 1;
        table.entries_[line.substr(0, tab)] = e;
        covered += line + "\n";
    }
    return corrupt("it has no end line (a truncated write?)");
}

void TuningTable::save(const std::string &path) const {
    std::string text = std::string(kHeader) + "\n";
    for (const auto &[key, e] : entries_)
        text += entry_line(key, e) + "\n";
    text += "end " + std::to_string(entries_.size()) + " " + util::content_hash(text) + "\n";
    std::filesystem::path p(path);
    std::error_code ec;
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
    std::string tmp = path + ".tmp." + std::to_string(::getpid());
    {
        std::ofstream out(tmp, std::ios::trunc);
        out << text;
        out.close();
        if (!out) throw RuntimeError("tuning table '" + path + "': cannot write " + tmp + ": " + std::strerror(errno));
    }
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        std::filesystem::remove(tmp);
        throw RuntimeError("tuning table '" + path + "': cannot replace it: " + ec.message());
    }
}

const TuningEntry *TuningTable::find(const std::string &key) const {
    auto it = entries_.find(key);
    return it == entries_.end() ? nullptr : &it->second;
}

} // namespace cora::driver
