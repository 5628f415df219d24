// A NeMo training configuration (YAML): read, imported, then loaded as `check` loads the result.
#include "../support.hpp"

#include "importer/nemo.hpp"
#include "scenario/scenario.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  const auto file = fuzz::write_input(data, size, ".yaml");
  fuzz::only_input_errors([&] {
    const auto imported =
        sim::importer::import_nemo(sim::importer::read_yaml_file(file), file.string(), {"dgx-h100", 64, "fuzz"}, {});
    (void)sim::scenario::load_scenario(sim::core::Json::parse(imported.scenario.dump()), "fuzz.json",
                                       {fuzz::data_dir(), {}});
  });
  return 0;
}
