#include "cli/file_check.hpp"

#include "hardware/gpu_spec.hpp"
#include "hardware/kernel_tables.hpp"
#include "model/hf_config.hpp"
#include "report/validation_summary.hpp"
#include "scenario/document_tree.hpp"

namespace sim::cli {

CheckedFile check_file(const std::filesystem::path& file, const scenario::LoadOptions& options)
{
  using scenario::ReferenceKind;
  scenario::DocumentTree tree(file, options.data_dir);
  const core::Json& root = tree.root();
  CheckedFile checked;
  if (model::looks_like_hf_config(root)) {
    checked.kind = FileKind::HF_CONFIG;
    const auto converted = model::convert_hf_config(tree.node(), file.parent_path().filename().string());
    core::Provenance provenance;
    provenance.add_source("", core::display_path(file));
    checked.name = model::read_model(core::Node(converted.model, "", provenance)).name;
    return checked;
  }
  const core::Node root_node = tree.node();
  if (!root.is_object())
    root_node.fail_found("wrong type", core::describe_type(root), "a JSON object with a \"schema\"");
  const auto schema = root.find("schema");
  const std::string expected_schema =
      "one of scenario/v1, model/v1, topology/v1, gpu/v1, kernels/v1, validation-summary/v1 (or a HuggingFace "
      "config.json)";
  if (schema == root.end())
    throw core::InputError(tree.provenance().locate("/schema"), "missing required key", "nothing", expected_schema);
  const std::string name = schema->is_string() ? schema->get<std::string>() : "";
  if (name == "scenario/v1") {
    scenario::Scenario s = scenario::load_scenario(tree, file, options);
    checked.kind = FileKind::SCENARIO;
    checked.name = s.name;
    checked.warnings = s.warnings;
    checked.scenario = std::move(s);
  } else if (name == "model/v1") {
    scenario::apply_overrides(tree, options, ReferenceKind::MODEL);
    checked.kind = FileKind::MODEL;
    checked.name = model::read_model(tree.node()).name;
  } else if (name == "topology/v1") {
    scenario::apply_overrides(tree, options, ReferenceKind::TOPOLOGY);
    checked.kind = FileKind::TOPOLOGY;
    const auto cluster = topology::read_cluster(tree.node());
    checked.name = cluster.name;
    checked.warnings = cluster.warnings;
  } else if (name == "gpu/v1") {
    scenario::apply_overrides(tree, options, ReferenceKind::GPU);
    checked.kind = FileKind::GPU;
    checked.name = hardware::read_gpu(tree.node()).name;
  } else if (name == "kernels/v1") {
    scenario::apply_overrides(tree, options, ReferenceKind::KERNELS);
    checked.kind = FileKind::KERNELS;
    checked.name = hardware::read_kernel_tables(tree.node())->name;
  } else if (name == "validation-summary/v1") {
    checked.kind = FileKind::VALIDATION_SUMMARY;
    checked.name = report::read_summary(tree.node()).cases_file;
  } else {
    tree.node("/schema").fail("unsupported schema", expected_schema);
  }
  return checked;
}

std::string_view describe(FileKind kind)
{
  switch (kind) {
    case FileKind::SCENARIO:
      return "scenario";
    case FileKind::MODEL:
      return "model";
    case FileKind::HF_CONFIG:
      return "model (HuggingFace config)";
    case FileKind::TOPOLOGY:
      return "topology";
    case FileKind::GPU:
      return "GPU";
    case FileKind::KERNELS:
      return "kernel tables";
    case FileKind::VALIDATION_SUMMARY:
      return "validation summary of";
  }
  return "file";
}

} // namespace sim::cli
