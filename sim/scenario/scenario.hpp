// A scenario: a model, a cluster and a parallel plan, loaded from scenario/v1 with its references resolved,
// overrides applied and every cross-file check done.
#pragma once

#include "core/input_error.hpp"
#include "model/model_spec.hpp"
#include "plan/parallel_plan.hpp"
#include "scenario/document_tree.hpp"
#include "scenario/economics.hpp"
#include "topology/cluster_spec.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace sim::scenario {

struct LoadOptions {
  std::filesystem::path data_dir;     // holds models/, topologies/ (the presets)
  std::vector<std::string> overrides; // --set PATH=VALUE, applied in order
  bool hash_setup = false;            // fill Scenario::setup_hash (a sweep telling its own layout; about 1 ms)
};

struct Scenario {
  std::string name;
  std::string description;
  std::string file; // as shown in messages
  model::ModelSpec model;
  topology::ClusterSpec cluster;
  plan::ParallelPlan plan;
  Economics economics;
  int gpus = 0;
  int nodes = 0;
  std::vector<core::Warning> warnings;
  std::vector<std::string> overrides; // the --set expressions applied, in order
  // With LoadOptions::hash_setup, a hash of everything but the plan, name and description (model, cluster, GPU,
  // kernels, cost), as resolved: two scenarios with the same hash and plan simulate the same thing. Else 0.
  std::size_t setup_hash = 0;
};

Scenario load_scenario(const std::filesystem::path& file, const LoadOptions& options);
// A scenario held in memory (an importer's), read as if it were the file `file`, which need not exist.
Scenario load_scenario(core::Json root, const std::filesystem::path& file, const LoadOptions& options);
// A scenario from a document tree already read (`simtrain check`, which read it to learn its schema): the tree is
// resolved and overridden in place, not copied (a deeply nested value would overflow the stack when copied).
Scenario load_scenario(DocumentTree& tree, const std::filesystem::path& file, const LoadOptions& options);

// The overrides applied to a document of `kind` read on its own (a model, topology, GPU or kernel tables file), after
// resolving the references its kind has, as reading it in a scenario does.
void apply_overrides(DocumentTree& tree, const LoadOptions& options, ReferenceKind kind);

// A topology by path or preset name, with overrides relative to the topology (node.nics.count=4).
topology::ClusterSpec load_cluster(const std::string& reference, const LoadOptions& options);

// A model by path (model/v1 or a HuggingFace config.json, relative to the working folder) or preset name, as a scenario
// naming it would read it.
model::ModelSpec load_model(const std::string& reference, const LoadOptions& options);

// Nodes for `gpus` GPUs on `cluster` (pinned nodes when gpus is 0); throws core::InputError naming `where`.
int nodes_for(const topology::ClusterSpec& cluster, int gpus, const std::string& where);

} // namespace sim::scenario
