// What `simtrain kernels` prints: every kernel of one micro-batch's layer, embedding and output layer on one
// tensor-parallel rank, with its class, shape, achieved rate and time, so that the compute model can be checked
// kernel by kernel against a profile.
#pragma once

#include "core/document.hpp"
#include "workload/layer_program.hpp"

#include <string>
#include <vector>

namespace sim::report {

std::string kernels_text(const std::vector<workload::KernelCost>& costs);
core::Json kernels_json(const std::vector<workload::KernelCost>& costs);

} // namespace sim::report
