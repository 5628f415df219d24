// The host's side of a kernel: the CPU time a framework's eager PyTorch takes to launch it (Python, the dispatcher,
// the CUDA launch). The GPU runs a kernel only after the host has launched it, so a stretch of kernels shorter than
// their launches leaves the GPU waiting (engine/replay keeps each GPU's host clock).
#pragma once

#include "hardware/compute_model.hpp"

namespace sim::hardware {

// CPU seconds to launch `k` (a grouped expert GEMM: one call that launches a GEMM per local expert, as Transformer
// Engine's GroupedLinear does).
double host_launch_time(const Kernel& k);

} // namespace sim::hardware
