// Turns a published training run (one entry of a validation cases file) into simtrain scenarios and the
// measurements to hold them against, or says why simtrain cannot express it. Pure: JSON in, values out. Each part of
// a case has its own file: case_model (the model), case_hardware (GPU and topology), case_plan (the plan and its
// software), case_measurements (what was measured); case_reading holds what they share.
#pragma once

#include "core/document.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace sim::validation {

// What was measured, each compared in the source's own convention. SI inside: seconds, bytes, FLOP/s, fractions.
enum class Quantity {
  STEP_TIME,         // seconds per iteration
  MFU,               // model FLOPs (no recomputation) / (GPUs x peak)
  HFU,               // the same counting recomputation
  MODEL_FLOPS,       // model FLOP/s per GPU
  HARDWARE_FLOPS,    // FLOP/s per GPU counting recomputation (Narayanan et al. Eq. 3)
  TOKENS_PER_GPU,    // tokens/s per GPU
  LAYER_FORWARD,     // seconds for one transformer layer's forward pass
  LAYER_BACKWARD,    // ... its backward pass, recomputation included
  LAYER_TOTAL,       // forward + backward
  STATE_MEMORY,      // bytes of the transformer layers' weights, gradients and optimizer state on the first stage
  ACTIVATION_MEMORY, // bytes of the transformer layers' activations held there
  ACTIVATION_SHARE,  // those activations relative to a baseline run's
  PEAK_MEMORY,       // bytes at the fullest GPU's peak (fine-tuning sources: what PyTorch's allocator reported)
};

std::string_view quantity_name(Quantity q);

// What a quantity says about a prediction: how long the step takes (times and throughputs) or how much memory it holds.
enum class Aspect { TIME, MEMORY };
Aspect aspect_of(Quantity q);

struct Expectation {
  Quantity quantity = Quantity::STEP_TIME;
  double measured = 0;
  std::string key{};   // where in the case, as a JSON pointer: /measured/mfu
  bool primary = true; // counts in the error statistics (false: a restatement of a primary value)
  // MFU and model FLOP/s: the FLOPs per token the source counts (case schema v2's model_flops_per_seq over the
  // sequence), so that the prediction is counted as the source counts; none: simtrain's own count.
  std::optional<double> source_flops_per_token{};
  // MFU and HFU: simtrain's peak over the peak the source divides by (an FP8 run's MFU: simtrain divides by the BF16
  // peak; a source that divides by the FP8 peak gets bf16 / fp8, about 0.5).
  double peak_scale = 1.0;
};

struct SimulationRun {
  std::string name;       // the case id, with a variant suffix where one case needs several runs
  core::Json scenario;    // a self-contained scenario/v1 document (GPU presets by name)
  bool simulate = true;   // false: the memory analysis answers every expectation
  std::string baseline{}; // ACTIVATION_SHARE: the run whose activations count as 100 %
  std::vector<Expectation> expectations{};
};

struct CaseConversion {
  std::string id;
  std::string source; // the publication and table, short
  std::string gpu;    // the GPU preset
  std::vector<SimulationRun> runs;
  std::vector<std::string> assumptions; // what the case leaves open and the conversion chose
  std::vector<std::string> ignored;     // measured values not compared, and why
  std::string unsupported;              // why simtrain cannot express the case; empty when it can
};

// `data_dir` holds the presets (topologies/ is read to inline a topology whose GPU or NICs the case changes).
CaseConversion convert_case(const core::Json& c, const std::filesystem::path& data_dir);

// "Narayanan et al., SC21 ... Table 1 (weak scaling); ..." -> "SC21 Table 1".
std::string short_source(const std::string& source);

} // namespace sim::validation
