// A HuggingFace config.json: converted to model/v1 and read, as a scenario's `model` path would be.
#include "../support.hpp"

#include "cli/file_check.hpp"
#include "scenario/scenario.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  const auto file = fuzz::write_input(data, size);
  fuzz::only_input_errors([&] { (void)sim::cli::check_file(file, {fuzz::data_dir(), {}}); });
  return 0;
}
