// A sweep.json as `simtrain merge` reads it: parsed, merged with itself (as two shards would be), ranked and printed.
#include "../support.hpp"

#include "core/document.hpp"
#include "study/sweep.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  const auto file = fuzz::write_input(data, size);
  fuzz::only_input_errors([&] {
    const auto part = sim::study::sweep_from_json(sim::core::read_json_file(file), file.string());
    const auto merged = sim::study::merge_sweeps({part});
    (void)sim::study::sweep_text(merged, {.top = 10});
    (void)sim::study::sweep_csv(merged);
    (void)sim::study::sweep_json(merged);
  });
  return 0;
}
