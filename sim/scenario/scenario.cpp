#include "scenario/scenario.hpp"

#include "core/units.hpp"
#include "plan/plan_reader.hpp"
#include "scenario/document_tree.hpp"
#include "workload/layer_program.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <fmt/format.h>

namespace sim::scenario {
namespace {

void resolve_scenario_references(DocumentTree& tree)
{
  tree.resolve("/model", ReferenceKind::MODEL);
  tree.resolve("/topology", ReferenceKind::TOPOLOGY);
  tree.resolve("/topology/node/gpu", ReferenceKind::GPU);
  tree.resolve("/topology/node/gpu/kernel_tables", ReferenceKind::KERNELS);
  // Other GPU kinds on some nodes.
  const auto* kinds = tree.root().contains("node_gpus") ? &tree.root()["node_gpus"] : nullptr;
  if (kinds != nullptr && kinds->is_array() && kinds->size() > topology::max_node_gpus)
    tree.node("/node_gpus")
        .fail_found("too many ranges", fmt::format("{} ranges", kinds->size()),
                    fmt::format("at most {} (each a run of nodes of another kind)", topology::max_node_gpus));
  if (kinds != nullptr && kinds->is_array())
    for (std::size_t i = 0; i < kinds->size(); ++i) {
      const std::string at = fmt::format("/node_gpus/{}/gpu", i);
      tree.resolve(at, ReferenceKind::GPU);
      tree.resolve(at + "/kernel_tables", ReferenceKind::KERNELS);
    }
}

void resolve_topology_references(DocumentTree& tree)
{
  tree.resolve("/node/gpu", ReferenceKind::GPU);
  tree.resolve("/node/gpu/kernel_tables", ReferenceKind::KERNELS);
}

void apply_overrides(DocumentTree& tree, const LoadOptions& options, void (*resolve_all)(DocumentTree&))
{
  for (const auto& expression : options.overrides)
    tree.apply_override(expression, [&] { resolve_all(tree); });
  resolve_all(tree);
}

void resolve_gpu_references(DocumentTree& tree)
{
  tree.resolve("/kernel_tables", ReferenceKind::KERNELS);
}

void resolve_nothing(DocumentTree&) {}

// A value made to read as it means, not as it is spelt: quantities in SI ("25GBps" and "200Gbps" alike), numbers as
// doubles. In place: the tree holds the kernel tables, tens of kilobytes.
void normalize(core::Json& j)
{
  if (j.is_object() || j.is_array()) {
    for (auto& item : j)
      normalize(item);
  } else if (j.is_number()) {
    j = j.get<double>();
  } else if (j.is_string()) {
    for (auto d :
         {core::Dimension::BYTES, core::Dimension::BANDWIDTH, core::Dimension::TIME, core::Dimension::FLOP_RATE})
      if (const auto v = core::parse_quantity(j.get_ref<const std::string&>(), d)) {
        j = core::Json{{"si", *v}, {"dimension", static_cast<int>(d)}};
        return;
      }
  }
}

// FNV-1a (64 bits) of the resolved, normalised document: the same on every machine and build.
std::string document_digest(const DocumentTree& tree)
{
  core::Json document = tree.root();
  for (const char* key : {"name", "description"})
    document.erase(key);
  normalize(document);
  std::uint64_t h = 14695981039346656037ULL;
  for (const unsigned char c : document.dump()) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return fmt::format("{:016x}", h);
}

// What a scenario's layout decides, its model and cluster already in `s`: the GPU and node counts, the plan, the cost,
// the stragglers and other GPU kinds on those nodes, and the plan's checks. `r` reads the scenario's root.
void read_layout(Scenario& s, core::ObjectReader& r)
{
  std::optional<int> known_gpus;
  if (s.cluster.nodes)
    known_gpus = *s.cluster.nodes * s.cluster.node.gpus;
  const auto gpus_node = r.find("gpus");
  if (gpus_node) {
    const int g = static_cast<int>(gpus_node->as_integer(1, 1 << 24));
    if (known_gpus && *known_gpus != g)
      gpus_node->fail(fmt::format("topology '{}' pins {} nodes of {} GPUs = {} GPUs", s.cluster.name, *s.cluster.nodes,
                                  s.cluster.node.gpus, *known_gpus),
                      fmt::format("{}, or no `gpus` key", *known_gpus));
    known_gpus = g;
  }
  const core::Node plan_node = r.at("plan", "an object with the parallel plan");
  s.plan = plan::read_plan(plan_node, s.model, known_gpus);
  s.economics = read_economics(r);
  const auto stragglers = r.find("stragglers");
  const auto node_gpus = r.find("node_gpus");
  r.finish();

  s.gpus = known_gpus.value_or(s.plan.gpus());
  const int per_node = s.cluster.node.gpus;
  if (s.gpus > per_node && s.gpus % per_node != 0) {
    const core::Location where = gpus_node
                                     ? gpus_node->location()
                                     : plan_node.provenance().locate(core::pointer_append(plan_node.pointer(), "dp"));
    throw core::InfeasiblePlan(
        where, fmt::format("{} GPUs do not fill whole {}-GPU nodes of '{}'", s.gpus, per_node, s.cluster.name), {},
        fmt::format("a multiple of {} GPUs (or at most one node)", per_node));
  }
  s.nodes = (s.gpus + per_node - 1) / per_node;
  if (stragglers)
    s.cluster.stragglers = topology::read_stragglers(*stragglers, s.cluster, s.nodes);
  if (node_gpus) {
    s.cluster.node_gpus = topology::read_node_gpus(*node_gpus, s.cluster, s.nodes);
    // Every kind runs the plan's steps: its precision, and the same kernels as the topology's part.
    const auto base = workload::build_programs(s.model, s.plan, s.cluster.gpu);
    for (std::size_t i = 0; i < s.cluster.node_gpus.size(); ++i) {
      const auto& gpu = s.cluster.node_gpus[i].gpu;
      const core::Node at = node_gpus->element(i).element_of("gpu");
      if (!gpu.peak(s.plan.precision))
        at.fail_found(
            "no rate for the plan's precision",
            fmt::format("'{}' without {}", gpu.name, core::choice_name(s.plan.precision, hardware::precision_choices)),
            "a part with the plan's precision in its peak_flops");
      if (!workload::same_steps(base, workload::build_programs(s.model, s.plan, gpu)))
        at.fail_found("other kernels",
                      fmt::format("'{}' runs other kernels than '{}' for this plan", gpu.name, s.cluster.gpu.name),
                      "a part whose kernels match the topology's (the same generation)");
    }
  }
  s.warnings = s.cluster.warnings;
  const auto plan_warnings = plan::check_plan(s.plan, plan_node, s.model, s.cluster, s.gpus);
  s.warnings.insert(s.warnings.end(), plan_warnings.begin(), plan_warnings.end());
}

Scenario read_scenario(const DocumentTree& tree, const std::filesystem::path& file)
{
  core::ObjectReader r(tree.node());
  core::expect_schema(r, "scenario/v1");
  Scenario s;
  s.file = core::display_path(file);
  s.name = r.text_or("name", file.stem().string());
  s.description = r.text_or("description", "");
  s.model = model::read_model(r.at("model", "a model preset name, a path, or an object"));
  s.cluster = topology::read_cluster(r.at("topology", "a topology preset name, a path, or an object"));
  read_layout(s, r);
  return s;
}

// The keys of a scenario's root that read_layout reads.
constexpr std::array layout_keys{"gpus", "plan", "cost", "training_tokens", "reliability", "stragglers", "node_gpus"};

// Whether an override `PATH=VALUE` changes only what read_layout reads (node_gpus names GPUs to resolve: not so).
bool changes_layout_only(const std::string& expression)
{
  const std::string head = expression.substr(0, expression.find_first_of(".="));
  return head != "node_gpus" &&
         std::find(layout_keys.begin(), layout_keys.end(), std::string_view(head)) != layout_keys.end();
}

} // namespace

ScenarioVariants::ScenarioVariants(const std::filesystem::path& file, LoadOptions options)
    : file_(file), options_(std::move(options)), tree_(file, options_.data_dir)
{
  apply_overrides(tree_, options_, resolve_scenario_references);
  base_ = read_scenario(tree_, file_);
  base_.overrides = options_.overrides;
  if (options_.digest)
    base_.digest = document_digest(tree_);
  for (const char* key : layout_keys)
    if (tree_.root().contains(key))
      layout_[key] = tree_.root()[key];
}

Scenario ScenarioVariants::variant(const std::vector<std::string>& overrides) const
{
  Scenario s;
  if (std::all_of(overrides.begin(), overrides.end(), changes_layout_only)) {
    DocumentTree tree(layout_, file_, options_.data_dir);
    for (const auto& expression : overrides)
      tree.apply_override(expression, [] {});
    core::ObjectReader r(tree.node());
    s.file = base_.file;
    s.name = base_.name;
    s.description = base_.description;
    s.model = base_.model;
    s.cluster = base_.cluster;
    s.cluster.stragglers.clear();
    s.cluster.node_gpus.clear();
    read_layout(s, r);
  } else {
    DocumentTree tree = tree_;
    for (const auto& expression : overrides)
      tree.apply_override(expression, [&] { resolve_scenario_references(tree); });
    resolve_scenario_references(tree);
    s = read_scenario(tree, file_);
  }
  s.overrides = options_.overrides;
  s.overrides.insert(s.overrides.end(), overrides.begin(), overrides.end());
  return s;
}

Scenario load_scenario(const std::filesystem::path& file, const LoadOptions& options)
{
  return load_scenario(core::read_json_file(file), file, options);
}

Scenario load_scenario(core::Json root, const std::filesystem::path& file, const LoadOptions& options)
{
  DocumentTree tree(std::move(root), file, options.data_dir);
  return load_scenario(tree, file, options);
}

Scenario load_scenario(DocumentTree& tree, const std::filesystem::path& file, const LoadOptions& options)
{
  apply_overrides(tree, options, resolve_scenario_references);
  Scenario s = read_scenario(tree, file);
  s.overrides = options.overrides;
  if (options.digest)
    s.digest = document_digest(tree);
  return s;
}

topology::ClusterSpec load_cluster(const std::string& reference, const LoadOptions& options)
{
  std::filesystem::path file = reference;
  std::error_code ec;
  if (!std::filesystem::exists(file, ec) && reference.find('/') == std::string::npos && !reference.ends_with(".json"))
    file = preset_path(options.data_dir, ReferenceKind::TOPOLOGY, reference);
  DocumentTree tree(file, options.data_dir);
  apply_overrides(tree, options, resolve_topology_references);
  return topology::read_cluster(tree.node());
}

model::ModelSpec load_model(const std::string& reference, const LoadOptions& options)
{
  std::error_code ec;
  DocumentTree tree(core::Json{{"model", reference}}, std::filesystem::current_path(ec) / "--model", options.data_dir);
  tree.resolve("/model", ReferenceKind::MODEL);
  return model::read_model(tree.node("/model"));
}

int nodes_for(const topology::ClusterSpec& cluster, int gpus, const std::string& where)
{
  const int per_node = cluster.node.gpus;
  if (gpus == 0)
    return cluster.nodes.value_or(1);
  if (gpus > per_node && gpus % per_node != 0)
    throw core::InputError({where, "", ""},
                           fmt::format("{} GPUs do not fill whole {}-GPU nodes of '{}'", gpus, per_node, cluster.name),
                           {}, fmt::format("a multiple of {}", per_node));
  const int nodes = (gpus + per_node - 1) / per_node;
  if (cluster.nodes && *cluster.nodes != nodes)
    throw core::InputError({where, "", ""}, fmt::format("topology '{}' pins {} nodes", cluster.name, *cluster.nodes),
                           {}, fmt::format("{} GPUs", *cluster.nodes * per_node));
  return nodes;
}

void apply_overrides(DocumentTree& tree, const LoadOptions& options, ReferenceKind kind)
{
  switch (kind) {
    case ReferenceKind::TOPOLOGY:
      return apply_overrides(tree, options, resolve_topology_references);
    case ReferenceKind::GPU:
      return apply_overrides(tree, options, resolve_gpu_references);
    case ReferenceKind::MODEL:
    case ReferenceKind::KERNELS:
      return apply_overrides(tree, options, resolve_nothing);
  }
}

bool same_setup(const Scenario& a, const Scenario& b)
{
  // What names and explains a part, or tells where its numbers come from, changes nothing that is simulated.
  const auto model = [](model::ModelSpec m) {
    m.name.clear();
    m.description.clear();
    m.source.clear();
    return m;
  };
  const auto tables = [](const hardware::GpuSpec& x, const hardware::GpuSpec& y) {
    return x.kernel_tables == y.kernel_tables ||
           (x.kernel_tables && y.kernel_tables && *x.kernel_tables == *y.kernel_tables);
  };
  const auto part = [](hardware::GpuSpec g) {
    g.description.clear();
    g.sources.clear();
    g.kernel_tables.reset(); // compared by content
    return g;
  };
  const auto cluster = [&part](topology::ClusterSpec c) {
    c.name.clear();
    c.description.clear();
    c.sources.clear();
    c.warnings.clear();
    // An NVSwitch bandwidth the file gives is every node's; one that each part's own NVLink has is no different.
    if (auto* sw = c.node.nvlink ? std::get_if<topology::NvSwitchFabric>(&*c.node.nvlink) : nullptr) {
      const auto differs = [sw](const hardware::GpuSpec& g) { return g.nvlink_bandwidth != sw->bandwidth; };
      sw->given = sw->given && (differs(c.gpu) || std::any_of(c.node_gpus.begin(), c.node_gpus.end(),
                                                              [&](const auto& k) { return differs(k.gpu); }));
    }
    c.gpu = part(c.gpu);
    for (auto& k : c.node_gpus)
      k.gpu = part(k.gpu);
    return c;
  };
  if (a.gpus != b.gpus || a.nodes != b.nodes || !(a.economics == b.economics) || !(model(a.model) == model(b.model)) ||
      !(cluster(a.cluster) == cluster(b.cluster)) || !tables(a.cluster.gpu, b.cluster.gpu))
    return false;
  for (std::size_t k = 0; k < a.cluster.node_gpus.size(); ++k)
    if (!tables(a.cluster.node_gpus[k].gpu, b.cluster.node_gpus[k].gpu))
      return false;
  return true;
}

} // namespace sim::scenario
