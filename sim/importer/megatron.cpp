#include "importer/megatron.hpp"

#include "core/document.hpp"
#include "core/input_error.hpp"
#include "importer/megatron_arguments.hpp"
#include "importer/megatron_launcher.hpp"
#include "importer/megatron_model.hpp"
#include "importer/megatron_no_effect.hpp"
#include "importer/megatron_plan.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <optional>
#include <span>

namespace sim::importer {

Imported import_megatron(const std::vector<std::string>& arguments, const Target& target,
                         const std::optional<GivenModel>& model)
{
  Imported out;
  for (std::size_t i = 0; i < arguments.size(); ++i)
    if (!core::is_valid_utf8(arguments[i]))
      throw core::InputError(core::Location{"megatron arguments", "", ""},
                             fmt::format("argument {} is not valid UTF-8", i + 1),
                             core::escape_invalid_utf8(core::clip(arguments[i], 40)), "text");
  const auto script = std::find_if(arguments.begin(), arguments.end(),
                                   [](const std::string& t) { return !is_option(t) && t.ends_with(".py"); });
  std::span<const std::string> own(arguments);
  std::optional<int> launched_gpus;
  if (script != arguments.end()) {
    const auto at = static_cast<std::size_t>(script - arguments.begin());
    const Launch launch = read_launcher(own.subspan(0, at), *script);
    launched_gpus = launch.gpus;
    for (const auto& g : launch.launcher)
      out.no_effect.push_back(
          Setting{g.name.empty() ? fmt::format("{}", fmt::join(g.values, " ")) : g.spelt(), "the launcher's"});
    own = own.subspan(at + 1);
  }
  Arguments a(parse_arguments(own));
  const auto tp = a.integer_or("tensor-model-parallel-size", 1, 1, 1 << 16);

  OrderedJson s;
  s["schema"] = "scenario/v1";
  s["name"] = target.name;
  s["description"] = fmt::format("Imported by simtrain import megatron from {} arguments",
                                 script != arguments.end() ? *script : std::string("Megatron-LM"));
  std::int64_t layers = 0;
  if (model) {
    if (const Given* described = a.find("num-layers"))
      Arguments::fail(*described, "describes a model while --model gives one",
                      fmt::format("{} layers", fmt::join(described->values, " ")),
                      "either the configuration's model or --model, not both");
    s["model"] = model->reference;
    layers = model->layers;
    out.origins.emplace_back("/model", "--model");
  } else {
    OrderedJson built = megatron_model(a, out, tp);
    layers = built["num_layers"].get<std::int64_t>();
    s["model"] = std::move(built);
  }
  s["topology"] = target.topology;
  // NeMo's trainer.devices x trainer.num_nodes, where no launcher gave a count.
  const auto devices = a.integer("nemo-devices", 1, 1 << 16);
  const auto nodes = a.integer("nemo-num-nodes", 1, 1 << 20);
  if (!launched_gpus && devices)
    launched_gpus = static_cast<int>(std::min<std::int64_t>(*devices * nodes.value_or(1), 1 << 24));
  const auto gpus = target.gpus ? target.gpus : launched_gpus;
  if (!gpus)
    throw core::InputError(core::Location{"megatron arguments", "", ""}, "the GPU count is not known",
                           "no --gpus and no launcher (torchrun --nproc_per_node N --nnodes M) before the script",
                           "--gpus N");
  if (!target.gpus)
    out.assumptions.push_back(fmt::format("{} GPUs, from the launcher's --nproc_per_node x --nnodes (NeMo's "
                                          "trainer.devices x trainer.num_nodes)",
                                          *gpus));
  s["gpus"] = *gpus;
  s["plan"] = megatron_plan(a, out, tp, layers);
  // Megatron-core's partial distributed optimizer (from 2024-11, MR !2170): the optimizer state sharded within each of
  // N consecutive groups of the data-parallel ranks (CP with them), gradients reduce-scattered there and all-reduced
  // across the groups (param_and_grad_buffer.py): hybrid sharding.
  if (const auto instances = a.integer("num-distributed-optimizer-instances", 1, 1 << 20);
      instances && *instances > 1) {
    const Given& given = *a.find("num-distributed-optimizer-instances");
    const std::int64_t dp_cp = *gpus / (s["plan"]["tp"].get<std::int64_t>() * s["plan"]["pp"].get<std::int64_t>());
    if (dp_cp % *instances != 0 || dp_cp / *instances < 2)
      Arguments::fail(given, "does not split the data-parallel ranks into groups of two or more",
                      fmt::format("{} instances of {} data-parallel ranks", *instances, dp_cp),
                      "a divisor of the data-parallel (x context-parallel) size");
    s["plan"]["shard_group"] = dp_cp / *instances;
    out.origins.emplace_back("/plan/shard_group", given.spelt());
  }
  if (const Given* g = a.find("tensor-model-parallel-size"))
    out.origins.emplace_back("/plan/tp", g->spelt());
  out.origins.emplace_back("/gpus", target.gpus ? "--gpus" : "the launcher's GPU count");

  for (const auto& g : a.all()) {
    if (g.idle && !g.written.empty())
      out.no_effect.push_back(Setting{g.written, ""});
    if (g.used || g.idle)
      continue;
    if (has_no_effect(g.name))
      out.no_effect.push_back(Setting{g.spelt(), ""});
    else
      out.not_simulated.push_back(
          Setting{g.name.empty() ? fmt::format("{}", fmt::join(g.values, " ")) : g.spelt(),
                  g.name.empty() ? "a word outside any argument"
                  : model ? "not understood, or a setting of the model, which is --model's: left out of the scenario"
                          : "not understood, left out of the scenario"});
  }
  out.scenario = std::move(s);
  return out;
}

} // namespace sim::importer
