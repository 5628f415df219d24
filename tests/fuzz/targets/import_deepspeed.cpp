// A DeepSpeed config: imported with a model and a GPU count, then loaded as `check` loads the result.
#include "../support.hpp"

#include "core/document.hpp"
#include "importer/deepspeed.hpp"
#include "scenario/scenario.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  const auto file = fuzz::write_input(data, size);
  fuzz::only_input_errors([&] {
    const sim::core::Json config = sim::core::read_json_file(file);
    sim::core::Provenance provenance;
    provenance.add_source("", file.string());
    const auto imported = sim::importer::import_deepspeed(sim::core::Node(config, "", provenance),
                                                          {"dgx-a100", 8, "fuzz"}, {"llama2-7b", 512, 1, 64});
    (void)sim::scenario::load_scenario(sim::core::Json::parse(imported.scenario.dump()), "fuzz.json",
                                       {fuzz::data_dir(), {}});
  });
  return 0;
}
