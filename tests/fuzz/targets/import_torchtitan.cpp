// A torchtitan job file (TOML): read, imported, then loaded as `check` loads the result.
#include "../support.hpp"

#include "importer/torchtitan.hpp"
#include "scenario/scenario.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  const auto file = fuzz::write_input(data, size, ".toml");
  fuzz::only_input_errors([&] {
    const sim::core::Json job = sim::importer::read_toml_file(file);
    sim::core::Provenance provenance;
    provenance.add_source("", file.string());
    const auto imported =
        sim::importer::import_torchtitan(sim::core::Node(job, "", provenance), {"dgx-h100", 64, "fuzz"}, "");
    (void)sim::scenario::load_scenario(sim::core::Json::parse(imported.scenario.dump()), "fuzz.json",
                                       {fuzz::data_dir(), {}});
  });
  return 0;
}
