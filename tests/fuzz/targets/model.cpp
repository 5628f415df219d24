// A model/v1 file, checked as `simtrain check` does, then counted (parameters and FLOPs).
#include "../support.hpp"

#include "cli/file_check.hpp"
#include "model/flops.hpp"
#include "model/model_spec.hpp"
#include "model/param_count.hpp"
#include "scenario/scenario.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  const auto file = fuzz::write_input(data, size);
  fuzz::only_input_errors([&] { (void)sim::cli::check_file(file, {fuzz::data_dir(), {}}); });
  return 0;
}
