// One JSON tree for a scenario with everything it references inlined: the model (model/v1 or a HuggingFace
// config.json), the topology and its GPU. `--set PATH=VALUE` overrides edit this tree, and every value in it can
// still be traced to its file and pointer for error messages.
#pragma once

#include "core/json_reader.hpp"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace sim::scenario {

enum class ReferenceKind { MODEL, TOPOLOGY, GPU, KERNELS };

class DocumentTree {
 public:
  // `data_dir` holds the presets: models/NAME.json, topologies/NAME.json, topologies/gpus/NAME.json,
  // topologies/gpus/kernels/NAME.json.
  DocumentTree(const std::filesystem::path& file, std::filesystem::path data_dir);
  // A document held in memory, read as if it were `file` (which need not exist): named so in messages, its
  // relative references resolved from `file`'s folder.
  DocumentTree(core::Json root, const std::filesystem::path& file, std::filesystem::path data_dir);

  // Replaces a reference (a preset name or a relative path) at `pointer` by the document it names.
  void resolve(const std::string& pointer, ReferenceKind kind);
  // `PATH=VALUE`, PATH dotted from the root (plan.tp, topology.node.gpu.memory); VALUE is JSON or else a string.
  // References along PATH are resolved first, through `resolve_all`.
  template <class ResolveAll>
  void apply_override(const std::string& expression, ResolveAll&& resolve_all)
  {
    resolve_all();
    set_path(expression);
  }

  core::Node node(const std::string& pointer = "") const;
  bool has(const std::string& pointer) const;
  const core::Json& root() const { return root_; }
  const core::Provenance& provenance() const { return provenance_; }

 private:
  void set_path(const std::string& expression);
  std::filesystem::path base_dir(const std::string& pointer) const;

  core::Json root_;
  core::Provenance provenance_;
  std::map<std::string, std::filesystem::path> dirs_;
  std::map<std::filesystem::path, core::Json> files_; // each file read once (a list may name one preset many times)
  std::filesystem::path data_dir_;
};

// Where the preset of `kind` called `name` lives under `data_dir`.
std::filesystem::path preset_path(const std::filesystem::path& data_dir, ReferenceKind kind, const std::string& name);
// The names of the presets of a kind (file names without .json), sorted.
std::vector<std::string> presets(const std::filesystem::path& data_dir, ReferenceKind kind);

} // namespace sim::scenario
