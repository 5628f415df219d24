#include "validation/case_conversion.hpp"

#include "validation/case_hardware.hpp"
#include "validation/case_measurements.hpp"
#include "validation/case_model.hpp"
#include "validation/case_plan.hpp"
#include "validation/case_reading.hpp"

#include "core/document.hpp"
#include "scenario/document_tree.hpp"

#include <fmt/format.h>
#include <regex>
#include <set>

namespace sim::validation {
namespace {

using core::Json;

// The fields of a case's top level; each part's own file lists the fields of its section. Any other field is one
// simtrain would not understand, so the case is refused rather than simulated without it.
const std::set<std::string>& case_fields()
{
  static const std::set<std::string> fields({"id", "source", "source_type", "model", "hardware", "plan", "measured",
                                             "notes", "confidence", "inferred_fields", "derived"});
  return fields;
}

CaseConversion refused(Conversion& conv, std::string why)
{
  conv.refuse(std::move(why));
  return conv.out();
}

} // namespace

std::string_view quantity_name(Quantity q)
{
  switch (q) {
    case Quantity::STEP_TIME:
      return "iteration time";
    case Quantity::MFU:
      return "MFU";
    case Quantity::HFU:
      return "HFU";
    case Quantity::MODEL_FLOPS:
      return "model TFLOP/s per GPU";
    case Quantity::HARDWARE_FLOPS:
      return "TFLOP/s per GPU (with recompute)";
    case Quantity::TOKENS_PER_GPU:
      return "tokens/s per GPU";
    case Quantity::LAYER_FORWARD:
      return "layer forward";
    case Quantity::LAYER_BACKWARD:
      return "layer backward";
    case Quantity::LAYER_TOTAL:
      return "layer forward+backward";
    case Quantity::STATE_MEMORY:
      return "layers' weights+grads+optimizer";
    case Quantity::ACTIVATION_MEMORY:
      return "layers' activation memory";
    case Quantity::ACTIVATION_SHARE:
      return "layers' activations vs baseline";
    case Quantity::PEAK_MEMORY:
      return "peak GPU memory";
  }
  return "?";
}

Aspect aspect_of(Quantity q)
{
  const bool memory = q == Quantity::STATE_MEMORY || q == Quantity::ACTIVATION_MEMORY ||
                      q == Quantity::ACTIVATION_SHARE || q == Quantity::PEAK_MEMORY;
  return memory ? Aspect::MEMORY : Aspect::TIME;
}

std::string short_source(const std::string& source)
{
  static const std::vector<std::pair<std::regex, std::string>> known{
      {std::regex("FP8 Performance"), "Megatron-LM FP8"},
      {std::regex("Megatron-Bridge"), "Megatron-Bridge"},
      {std::regex("SC21.*Table 1"), "SC21 Table 1"},
      {std::regex("SC21.*Table 2"), "SC21 Table 2"},
      {std::regex("SC21.*Sec\\. ?5\\.1"), "SC21 Sec. 5.1"},
      {std::regex("SC21.*Figure 18"), "SC21 Fig. 18"},
      {std::regex("Korthikanti.*Table 4"), "Korthikanti Table 4"},
      {std::regex("Korthikanti.*Figure"), "Korthikanti memory"},
      {std::regex("Megatron-Turing|MT-NLG"), "MT-NLG"},
      {std::regex("Megatron-LM README"), "Megatron-LM H100"},
      {std::regex("llm-foundry.*A100"), "MosaicML A100"},
      {std::regex("llm-foundry.*H100"), "MosaicML H100"},
      {std::regex("llm-foundry"), "MosaicML"},
      {std::regex("Automodel"), "NeMo AutoModel"},
      {std::regex("dgxc-benchmarking"), "DGX Cloud benchmarks"},
      {std::regex("NVIDIA/NeMo docs|nemo-framework"), "NeMo performance"},
      {std::regex("Primus"), "AMD Primus"},
      {std::regex("torchtitan"), "torchtitan"},
      {std::regex("Llama 3 Herd"), "Llama 3 paper"},
      {std::regex("QwenLM/Qwen"), "Qwen fine-tuning"},
      {std::regex("torchtune"), "torchtune"},
      {std::regex("DeepSpeed.*zero-offload"), "ZeRO-Offload tutorial"},
      {std::regex("fsdp_qlora"), "Answer.AI FSDP+QLoRA"},
  };
  for (const auto& [pattern, name] : known)
    if (std::regex_search(source, pattern))
      return name;
  std::string s = source.substr(0, source.find_first_of(",("));
  while (!s.empty() && s.back() == ' ')
    s.pop_back();
  return s.size() > 40 ? s.substr(0, 40) : s;
}

CaseConversion convert_case(const core::Json& c, const std::filesystem::path& data_dir)
{
  Conversion conv(c, data_dir);
  if (!c.is_object())
    return refused(conv, "not a JSON object");
  const std::pair<std::string_view, const std::set<std::string>*> sections[] = {
      {"", &case_fields()}, {"model", &model_fields()}, {"hardware", &hardware_fields()}, {"plan", &plan_fields()}};
  for (const auto& [name, known] : sections)
    if (const std::string field = unknown_field(name.empty() ? c : section(c, name), name, *known); !field.empty())
      return refused(conv,
                     fmt::format("field \"{}\" is not one simtrain reads: it cannot tell what it changes", field));

  const Json& hardware = section(c, "hardware");
  const auto hw = match_gpu(text(hardware, "gpu"));
  if (!hw)
    return refused(conv, fmt::format("GPU \"{}\" is not in the catalogue", text(hardware, "gpu")));
  conv.out().gpu = hw->gpu;
  if (const std::string why = plan_refusal(section(c, "plan")); !why.empty())
    return refused(conv, why);

  // Each part adds what it assumed; a part that cannot be expressed refuses the case and ends the conversion.
  const auto model = convert_model(conv);
  if (!model)
    return conv.out();
  const auto topology = convert_topology(conv, *hw);
  if (!topology)
    return conv.out();
  auto plan = convert_plan(conv, (*model)["seq_length"].get<std::int64_t>());
  if (!plan)
    return conv.out();
  if (flag(section(c, "plan"), "activation_cpu_offload").value_or(false)) {
    // Each layer's saved activations copied to host memory as its forward ends and back before its backward: over
    // the node's PCIe tree into its host's memory, which the preset must describe.
    const Json node = topology->is_string()
                          ? core::read_json_file(scenario::preset_path(data_dir, scenario::ReferenceKind::TOPOLOGY,
                                                                       topology->get<std::string>()))["node"]
                          : (*topology)["node"];
    if (!node.contains("host") || !node.contains("pcie"))
      return refused(conv, fmt::format("activation offloading to the CPU needs a node whose host is described, which "
                                       "{} is not",
                                       topology->is_string() ? topology->get<std::string>()
                                                             : (*topology)["name"].get<std::string>()));
    (*plan)["offload_activations"] = true;
    conv.assume("activation_cpu_offload: each layer's saved activations copied to host memory after its forward and "
                "back before its backward (plan.offload_activations)");
  }

  const Json scenario{
      {"schema", "scenario/v1"},
      {"name", conv.id()},
      {"description", fmt::format("{} ({}), converted by simtrain validate", conv.id(), conv.out().source)},
      {"model", *model},
      {"topology", *topology},
      {"plan", *plan}};
  add_runs(conv, scenario);
  if (conv.out().runs.empty() && !conv.refused())
    return refused(conv, "nothing measured that simtrain predicts");
  return conv.out();
}

} // namespace sim::validation
