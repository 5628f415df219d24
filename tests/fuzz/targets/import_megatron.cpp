// A Megatron-LM / NeMo command line (one argument per line): imported, then loaded as `check` loads the result.
#include "../support.hpp"

#include "importer/megatron.hpp"
#include "scenario/scenario.hpp"

#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  std::vector<std::string> args;
  std::string word;
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == '\n') {
      args.push_back(word);
      word.clear();
    } else {
      word.push_back(static_cast<char>(data[i]));
    }
  }
  if (!word.empty())
    args.push_back(word);
  fuzz::only_input_errors([&] {
    const auto imported = sim::importer::import_megatron(args, {"dgx-h100", 8, "fuzz"});
    (void)sim::scenario::load_scenario(sim::core::Json::parse(imported.scenario.dump()), "fuzz.json",
                                       {fuzz::data_dir(), {}});
  });
  return 0;
}
