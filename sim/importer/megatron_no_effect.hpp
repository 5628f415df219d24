// The Megatron-LM arguments that change nothing in one training step's time or memory, so that an import reports
// them as carried over with no effect rather than as left out.
#pragma once

#include <string_view>

namespace sim::importer {

// `name` without its dashes, as Given::name spells it ("lr", "log-interval").
bool has_no_effect(std::string_view name);

} // namespace sim::importer
