// The measured tile-size table (apps/spatial/tile_table.h): keys by size bucket, channels and
// density band; the rule when a key is missing; the file read back as written; bad files refused
// with the file and line.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "spatial/tile_table.h"

using cora::spatial::TileSize;
using cora::spatial::TileTable;

namespace {

std::string write_file(const std::string &name, const std::string &text) {
    std::string path = (std::filesystem::temp_directory_path() / name).string();
    std::ofstream(path) << text;
    return path;
}

} // namespace

TEST_CASE("the tile table looks up by bucket and band, falls back to its rule, and reads what it writes",
          "[spatial][tile_table]") {
    const std::vector<TileSize> candidates{{1, 8}, {2, 8}, {4, 8}, {8, 8}};
    TileTable t;
    REQUIRE(TileTable::band(0.0) == 0);
    REQUIRE(TileTable::band(0.049) == 0);
    REQUIRE(TileTable::band(0.05) == 1);
    REQUIRE(TileTable::band(0.2) == 2);
    REQUIRE(TileTable::band(0.4) == 3);
    REQUIRE(TileTable::band(1.0) == 3);
    REQUIRE(TileTable::bucket(1) == 1);
    REQUIRE(TileTable::bucket(80) == 128);
    REQUIRE(TileTable::bucket(128) == 128);
    // The rule: 1x8 below 5% density, 2x8 above.
    REQUIRE(t.choose(80, 80, 128, 0.03, candidates) == TileSize{1, 8});
    REQUIRE(t.choose(80, 80, 128, 0.3, candidates) == TileSize{2, 8});
    // The rule picks the closest candidate when its own is missing.
    REQUIRE(t.choose(80, 80, 128, 0.3, {{8, 8}, {16, 16}}) == TileSize{8, 8});
    t.record(80, 80, 128, 0.3, {8, 8});
    REQUIRE(t.lookup(100, 70, 128, 0.25) == TileSize{8, 8}); // the same buckets and band
    REQUIRE(!t.lookup(80, 80, 64, 0.3));                     // other channels
    REQUIRE(!t.lookup(80, 80, 128, 0.1));                    // another band
    REQUIRE(t.choose(80, 80, 128, 0.3, candidates) == TileSize{8, 8});
    // An entry that is not a candidate (kernels exist only for the candidates): the rule.
    REQUIRE(t.choose(80, 80, 128, 0.3, {{4, 8}, {16, 8}}) == TileSize{4, 8});

    std::string path = (std::filesystem::temp_directory_path() / "cora_tile_table_test.txt").string();
    t.record(20, 20, 512, 0.03, {16, 8});
    t.write(path);
    TileTable back = TileTable::read(path);
    REQUIRE(back.size() == 2);
    REQUIRE(back.lookup(80, 80, 128, 0.3) == TileSize{8, 8});
    REQUIRE(back.lookup(20, 20, 512, 0.01) == TileSize{16, 8});
    std::remove(path.c_str());
}

TEST_CASE("a bad tile table file is refused with its line", "[spatial][tile_table][errors]") {
    auto refused = [](const std::string &name, const std::string &text, const std::string &message) {
        std::string path = write_file(name, text);
        INFO(text);
        REQUIRE_THROWS_WITH(TileTable::read(path), path + message);
        std::remove(path.c_str());
    };
    refused("cora_tt_header.txt", "tiles 1\n", ":1: expected the header 'cora-tile-table 1'");
    refused("cora_tt_empty.txt", "% nothing\n", ": empty; expected the header 'cora-tile-table 1'");
    refused("cora_tt_fields.txt", "cora-tile-table 1\n80 80 128 2 8\n",
            ":2: expected 'rows cols channels band tile_h tile_w', got '80 80 128 2 8'");
    refused("cora_tt_band.txt", "cora-tile-table 1\n% c\n80 80 128 4 8 8\n",
            ":3: a size is out of range in '80 80 128 4 8 8' (band 0-3, tiles 1-1024)");
    refused("cora_tt_extra.txt", "cora-tile-table 1\n80 80 128 1 8 8 9\n",
            ":2: expected 'rows cols channels band tile_h tile_w', got '80 80 128 1 8 8 9'");
    REQUIRE_THROWS_WITH(TileTable::read("/nonexistent/cora_tiles.txt"),
                        "/nonexistent/cora_tiles.txt: cannot open the tile table");
}
