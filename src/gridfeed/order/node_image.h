// A node's share of Megatron-format tables: the table image (table_image.h) of only the
// positions one node's readers read (--node-window), so a node holds what its readers read
// rather than the whole order. Each held sample keeps its own copy of the sample-index rows and
// the document ids it spans; the view (SplitView::held) maps a held position to them, and every
// sample reads, and records, exactly as from the whole image. Pure; thread safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "gridfeed/core/status.h"
#include "gridfeed/order/dataset_builder.h"
#include "gridfeed/order/image_writer.h"
#include "gridfeed/order/split.h"

namespace gridfeed::order {

// The image of positions `held` (sorted, unique, in the split) of `split` of `built`, which
// must outlive nothing (everything is copied). `keep_source_index`: the image also keeps the
// split's source of every position (what a checkpoint counts on world rank 0). InvalidArgument
// for held positions that are not sorted, unique and in the split.
Result<std::unique_ptr<ImageWriter>> NodeImageOf(const BuiltDatasets& built, Split split,
                                                 std::vector<int64_t> held, bool keep_source_index);

// Many producers (--table-producers): the stores of weighted blends are divided among several
// producers (node leaders). Each builds the blend tables (weights and sizes only) and the tables
// of its own stores (DatasetConfig::builds_store), learns the other mids' facts from their
// producers (OwnMidFacts/AdoptMidFacts), and cuts every node's sections of its own sources
// from its tables (NodeSectionsOf); each node's leader then assembles its image from every
// producer's sections for it (AssembleNodeImage), byte for byte the image NodeImageOf makes
// from one process's whole build. Pure functions; thread safe.

// Which producer builds each store, given each store's cost (e.g. its index bytes): the
// largest first, each to the least loaded producer (ties: the lowest numbered).
std::vector<int> PlanProducers(std::span<const uint64_t> costs, int producers);
// How many producers a plan gives work (owners of at least one unit): what a job reports as
// its producers.
int Builders(std::span<const int> owner);

// A producer's facts of the mids it built: {split, k, begin, end, samples per epoch} each.
std::vector<int64_t> OwnMidFacts(const BuiltDatasets& share);
// Completes `share`'s other producers' mids from every producer's facts (concatenated).
// DataLoss for an entry of a bad shape, a mid given twice or by no producer.
Status AdoptMidFacts(std::span<const int64_t> facts, BuiltDatasets* share);

// What `share` holds of node `held` (sorted, unique, in the split) of `split`: the held
// samples of each source it built, as self-describing bytes with their XXH3 digest and
// `producer` (its number among the producers).
Result<std::vector<std::byte>> NodeSectionsOf(const BuiltDatasets& share, Split split,
                                              std::span<const int64_t> held, int producer);
// The node image of `held` from `sections[p]`, producer p's sections for this node, over
// `share`'s blend and mids (AdoptMidFacts done). DataLoss naming the producer for sections whose
// digest or shape is wrong, whose sample counts differ from what the blend gives this node, or a
// source given by none or by two.
// Each producer's sections are freed as soon as they are read (the node image is then held
// about once, not twice).
Result<std::unique_ptr<ImageWriter>> AssembleNodeImage(
    const BuiltDatasets& share, Split split, std::vector<int64_t> held, bool keep_source_index,
    std::vector<std::vector<std::byte>> sections);
// Frees the tables of `share`'s own sources once every node's sections are cut: assembling
// needs only the blend and the mids' facts.
void ReleaseSourceTables(BuiltDatasets* share);

// Many producers of the whole image (Pipeline::BuildWholeShare, --node-window full or orders
// without node images): each producer sends every other the tables of the mids it built, and
// each puts them all back into its share, whose table image is then byte for byte the image of
// one process's whole build.
// The tables of `share`'s own mids (every split), framed as producer `producer`'s sections
// (order/sections.h): per mid its place, its tables' scalars and its three tables.
Result<std::vector<std::byte>> WholeSectionsOf(const BuiltDatasets& share, int producer);
// Puts every producer's tables (`sections[p]`: producer p's, freed as they are read) into
// `share` (AdoptMidFacts done; its own tables are taken from its own sections too, so they may
// be released). `seq_length` and `add_extra_token`: the build's (a mid's own seq_length
// overrides the first). DataLoss naming the producer for sections that fail their digest or
// shape, a mid given twice or by none, or tables whose lengths do not fit the mid's facts.
Status AdoptWholeSections(std::vector<std::vector<std::byte>> sections, int64_t seq_length,
                          bool add_extra_token, BuiltDatasets* share);

}  // namespace gridfeed::order
