// gridfeed tables: build every split's tables and write them as the order's pipeline lays
// them out (Megatron's index tables in a golden case folder's layout, OLMo's global indices,
// SFT's blends), plus summary.json.
#include <memory>

#include "commands.h"
#include "gridfeed/config/flags.h"
#include "gridfeed/io/file_util.h"
#include "gridfeed/order/registry.h"
#include "offline_writer.h"

namespace gridfeed::app {

Runner RegisterTables(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "tables",
      "Build the order's tables and write them (Megatron's index tables, or OLMo's "
      "global_indices.npy)");
  // Grid and batch: an OLMo order depends on the DP size and the global batch size.
  auto flags = std::make_shared<config::OptionFlags>(
      sub, config::Groups{config::Group::kData, config::Group::kGrid, config::Group::kBatch});
  auto out = std::make_shared<std::string>();
  auto replace = std::make_shared<bool>(false);
  sub->add_option("--out", *out, "Output folder (new or empty; published as a whole)")->required();
  sub->add_flag("--replace", *replace, "Replace a non-empty --out folder as a whole");
  return [flags, out, replace]() -> Status {
    GRIDFEED_ASSIGN_OR_RETURN(config::JobOptions o, flags->Resolve());
    const order::PipelineKind& kind = order::KindOf(o.data);
    if (!kind.tables) return InvalidArgument(kind.no_tables);
    // Refused before the build when --out holds another run and --replace is absent.
    GRIDFEED_ASSIGN_OR_RETURN(std::unique_ptr<OfflineWriter> writer,
                              OfflineWriter::Create(*out, *replace));
    // Tables done before the rest are written at once, beside the build; an interrupt then
    // removes their temporaries.
    GRIDFEED_RETURN_IF_ERROR(io::RemoveTempFilesOnSignal());
    GRIDFEED_ASSIGN_OR_RETURN(order::OfflineOutput output, kind.tables(o, writer.get()));
    return writer->Finish(output);
  };
}

}  // namespace gridfeed::app
