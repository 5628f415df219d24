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
  bool digest = false;                // fill Scenario::digest (a sweep telling whose results it resumes; about 1 ms)
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
  // With LoadOptions::digest, 16 hex digits hashing the document as resolved and overridden (every file it names
  // read in, quantities in SI; name and description left out): a changed file or --set changes it. Else empty.
  std::string digest;
};

// Whether two scenarios give their plans the same model, cluster (GPUs, links, network, stragglers), GPU count and
// cost, as resolved, whatever names, descriptions and sources say: a setting spelt out at its default is the same.
bool same_setup(const Scenario& a, const Scenario& b);

Scenario load_scenario(const std::filesystem::path& file, const LoadOptions& options);
// A scenario held in memory (an importer's), read as if it were the file `file`, which need not exist.
Scenario load_scenario(core::Json root, const std::filesystem::path& file, const LoadOptions& options);
// A scenario from a document tree already read (`simtrain check`, which read it to learn its schema): the tree is
// resolved and overridden in place, not copied (a deeply nested value would overflow the stack when copied).
Scenario load_scenario(DocumentTree& tree, const std::filesystem::path& file, const LoadOptions& options);

// Variants of one scenario, each its overrides applied after the scenario's own (a sweep's layouts), read as
// load_scenario would read them with both lists, without reading the files again. A variant whose overrides change
// only what its layout decides (gpus, plan, cost, training_tokens, reliability, stragglers) keeps the model and cluster
// the scenario resolved to and reads the rest again; the others apply theirs to the document resolved once.
class ScenarioVariants {
 public:
  ScenarioVariants(const std::filesystem::path& file, LoadOptions options);
  // The scenario with the options' overrides alone.
  const Scenario& base() const { return base_; }
  Scenario variant(const std::vector<std::string>& overrides) const;

 private:
  std::filesystem::path file_;
  LoadOptions options_;
  DocumentTree tree_; // resolved, the options' overrides applied
  Scenario base_;
  core::Json layout_ = core::Json::object(); // the root's keys that the layout decides
};

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
