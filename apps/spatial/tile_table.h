/** \file Which tile size a spatially sparse layer runs with: a small measured table (DynaSpa's
 * PolyKernel idea, not a search framework). Kernels for a few candidate tile sizes are compiled
 * ahead; each batch picks one by the layer's shape and its mask's active fraction, from entries
 * measured by `bash bench/spatial.sh` (bench/results/spatial_tiles.txt), or a rule when the key
 * has no entry.
 *
 * Key: rows and cols rounded up to powers of two, the channels, and the density band: below
 * 0.05, below 0.2, below 0.4, the rest. Why these: the tile size trades the work on inactive
 * positions inside active tiles (smaller tiles waste less on sparse, scattered masks) against the
 * register tile's efficiency and the per-tile overhead (larger tiles); both move with the density
 * and with how many tiles the grid has, not with the exact size.
 *
 * The file: `cora-tile-table 1`, then one entry per line, `rows cols channels band tile_h tile_w`
 * (band 0-3); `%` lines are comments. Errors name the file and line. */
#pragma once

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace cora::spatial {

struct TileSize {
    int64_t h = 8, w = 8;
    bool operator==(const TileSize &o) const { return h == o.h && w == o.w; }
};

class TileTable {
public:
    /** The density band of an active fraction. */
    static int band(double density) { return density < 0.05 ? 0 : density < 0.2 ? 1 : density < 0.4 ? 2 : 3; }
    static int64_t bucket(int64_t size) {
        int64_t b = 1;
        while (b < size && b < ((int64_t)1 << 40))
            b *= 2;
        return b;
    }

    void record(int64_t rows, int64_t cols, int64_t channels, double density, TileSize t) {
        entries_[key(rows, cols, channels, band(density))] = t;
    }
    std::optional<TileSize> lookup(int64_t rows, int64_t cols, int64_t channels, double density) const {
        auto it = entries_.find(key(rows, cols, channels, band(density)));
        if (it == entries_.end()) return std::nullopt;
        return it->second;
    }
    /** The table's entry, else the rule measured on a 2-core AVX-512 machine (bench/results/
     * spatial.md, the direct route): tiles of one register row of 8 pixels, 2 rows of them (1 row
     * below 5% density: blob masks that sparse waste most in taller tiles); among `candidates`
     * the closest to that. */
    TileSize choose(int64_t rows, int64_t cols, int64_t channels, double density,
                    const std::vector<TileSize> &candidates) const {
        if (auto t = lookup(rows, cols, channels, density))
            for (const TileSize &c : candidates)
                if (c == *t) return c;
        TileSize rule = density < 0.05 ? TileSize{1, 8} : TileSize{2, 8};
        const TileSize *best = &candidates.at(0);
        for (const TileSize &c : candidates)
            if (std::abs(c.h * c.w - rule.h * rule.w) + std::abs(c.w - rule.w) <
                std::abs(best->h * best->w - rule.h * rule.w) + std::abs(best->w - rule.w))
                best = &c;
        return *best;
    }
    size_t size() const { return entries_.size(); }

    /** Reads a table file; std::runtime_error "path:line: what" for anything else. */
    static TileTable read(const std::string &path) {
        std::ifstream in(path);
        if (!in) throw std::runtime_error(path + ": cannot open the tile table");
        TileTable t;
        std::string line;
        int line_no = 0;
        bool header = false;
        while (std::getline(in, line)) {
            line_no++;
            if (!line.empty() && line.back() == '\r') line.pop_back();
            if (line.empty() || line[0] == '%') continue;
            auto fail = [&](const std::string &what) {
                throw std::runtime_error(path + ":" + std::to_string(line_no) + ": " + what);
            };
            if (!header) {
                if (line != "cora-tile-table 1") fail("expected the header 'cora-tile-table 1'");
                header = true;
                continue;
            }
            std::istringstream fields(line);
            int64_t rows, cols, channels, band, th, tw;
            std::string rest;
            if (!(fields >> rows >> cols >> channels >> band >> th >> tw) || (fields >> rest))
                fail("expected 'rows cols channels band tile_h tile_w', got '" + line.substr(0, 60) + "'");
            if (rows <= 0 || cols <= 0 || channels <= 0 || band < 0 || band > 3 || th <= 0 || tw <= 0 || th > 1024 ||
                tw > 1024)
                fail("a size is out of range in '" + line.substr(0, 60) + "' (band 0-3, tiles 1-1024)");
            t.entries_[key(rows, cols, channels, (int)band)] = TileSize{th, tw};
        }
        if (!header) throw std::runtime_error(path + ": empty; expected the header 'cora-tile-table 1'");
        return t;
    }
    void write(const std::string &path) const {
        std::ofstream out(path);
        out << "cora-tile-table 1\n% rows cols channels band tile_h tile_w (written by bench/spatial.sh)\n";
        for (const auto &[k, t] : entries_)
            out << std::get<0>(k) << " " << std::get<1>(k) << " " << std::get<2>(k) << " " << std::get<3>(k) << " "
                << t.h << " " << t.w << "\n";
        if (!out) throw std::runtime_error(path + ": writing the tile table failed");
    }

private:
    using Key = std::tuple<int64_t, int64_t, int64_t, int>;
    static Key key(int64_t rows, int64_t cols, int64_t channels, int band) {
        return {bucket(rows), bucket(cols), channels, band};
    }
    std::map<Key, TileSize> entries_;
};

} // namespace cora::spatial
