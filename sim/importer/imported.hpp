// What `simtrain import` makes of a framework's configuration (Megatron-LM arguments, a DeepSpeed config, a
// torchtitan job file): a scenario/v1 object, and an account of every setting it did not carry over.
#pragma once

#include "core/json_reader.hpp"

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace sim::importer {

using OrderedJson = nlohmann::ordered_json;

// Where the scenario runs, from the command line.
struct Target {
  std::string topology;    // a preset name or a path, as the scenario's "topology"
  std::optional<int> gpus; // the cluster's GPUs (the framework's own count where it gives one, else this)
  std::string name;        // the scenario's name
};

// A setting of the configuration as the user wrote it ("--lr 1e-4", "/zero_optimization/stage_3_x") and what
// became of it.
struct Setting {
  std::string setting;
  std::string why; // empty for settings that do not change a training step (learning rate, paths, logging)
};

struct Imported {
  OrderedJson scenario;
  std::vector<Setting> no_effect;       // understood; they change nothing in one step's time or memory
  std::vector<Setting> not_simulated;   // not understood, or understood but not simulated: left out, with why
  std::vector<std::string> assumptions; // choices made where the configuration is silent or ambiguous
  // For a scenario pointer (/plan/tp), the setting it came from, so that a refusal can name it.
  std::vector<std::pair<std::string, std::string>> origins;
};

// A setting as a warning or note names it: its JSON pointer and its value, clipped ("/zero_optimization/stage 3").
std::string spelt(const core::Node& n);

// Appends what `from` said of its settings (no effect, not simulated, assumed) to `to`'s account: an importer that
// reads its own keys around another's.
void add_accounts(Imported& to, Imported&& from);

// Sets `out.scenario` to a scenario/v1 of `plan` on the target's topology and GPUs, training `model`, described as
// imported by `simtrain import FRAMEWORK` from `file`; the GPU count's origin is --gpus.
void set_scenario(Imported& out, const Target& target, const std::string& framework, const std::string& file,
                  const std::string& model, OrderedJson plan);

} // namespace sim::importer
