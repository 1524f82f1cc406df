// gridfeed samples: assemble chosen positions of one split, as the reference dataset's
// dataset[pos] returns them (Megatron's, OLMo's, SFT's, FIM's), into .npy files.
#include <memory>

#include "commands.h"
#include "gridfeed/config/flags.h"
#include "gridfeed/order/registry.h"
#include "offline_writer.h"

namespace gridfeed::app {

Runner RegisterSamples(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("samples", "Assemble samples of one split into .npy files");
  auto flags = std::make_shared<config::OptionFlags>(
      sub, config::Groups{config::Group::kData, config::Group::kGrid, config::Group::kBatch,
                          config::Group::kSplitName});
  auto out = std::make_shared<std::string>();
  auto positions = std::make_shared<std::string>();
  auto replace = std::make_shared<bool>(false);
  sub->add_option("--out", *out, "Output folder (new or empty; published as a whole)")->required();
  sub->add_flag("--replace", *replace, "Replace a non-empty --out folder as a whole");
  sub->add_option("--positions", *positions, "e.g. 0:64,100,4000")->required();
  return [=]() -> Status {
    GRIDFEED_ASSIGN_OR_RETURN(config::JobOptions o, flags->Resolve());
    GRIDFEED_ASSIGN_OR_RETURN(std::unique_ptr<OfflineWriter> writer,
                              OfflineWriter::Create(*out, *replace));
    order::PositionRequest request;
    request.text = *positions;
    GRIDFEED_ASSIGN_OR_RETURN(order::OfflineOutput output,
                              order::KindOf(o.data).samples(o, request));
    return writer->Finish(output);
  };
}

}  // namespace gridfeed::app
