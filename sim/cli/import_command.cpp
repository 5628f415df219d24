// simtrain import: a framework's configuration in, a checked scenario/v1 out, and every setting that did not carry
// over said on stderr.
#include "cli/commands.hpp"
#include "core/diagnostics.hpp"
#include "core/document.hpp"
#include "importer/accelerate.hpp"
#include "importer/deepspeed.hpp"
#include "importer/hf_trainer.hpp"
#include "importer/llamafactory.hpp"
#include "importer/megatron.hpp"
#include "importer/nemo.hpp"
#include "importer/torchtitan.hpp"
#include "scenario/feasibility.hpp"
#include "scenario/scenario.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <iostream>

namespace sim::cli {
namespace {

namespace fs = std::filesystem;

// A reference to a file (not a preset name) as seen from the folder the scenario is written to.
std::string reference_from(const std::string& reference, const fs::path& scenario_dir)
{
  std::error_code ec;
  if (reference.empty() || !fs::is_regular_file(reference, ec))
    return reference;
  const fs::path from = scenario_dir.empty() ? fs::current_path(ec) : fs::absolute(scenario_dir, ec);
  const fs::path relative = fs::relative(fs::absolute(reference, ec), from, ec);
  return ec || relative.empty() ? fs::absolute(reference, ec).string() : relative.generic_string();
}

std::string origin_of(const importer::Imported& imported, const std::string& pointer)
{
  for (const auto& [prefix, setting] : imported.origins)
    if (!setting.empty() && (pointer == prefix || pointer.starts_with(prefix + "/")))
      return setting;
  return {};
}

void report(const importer::Imported& imported, const std::string& framework)
{
  for (const auto& s : imported.not_simulated)
    core::diagnose("warning", fmt::format("warning: {} setting {}: {}", framework, core::clip(s.setting, 100), s.why),
                   fmt::format("{}: {}", s.setting, s.why));
  for (const auto& a : imported.assumptions)
    core::diagnose("note", "note: assumed " + a, "assumed " + a);
  if (!imported.no_effect.empty()) {
    std::vector<std::string> names;
    for (const auto& s : imported.no_effect)
      names.push_back(core::clip(s.setting, 40));
    const std::string message =
        fmt::format("{} settings change nothing in one training step's time or memory (learning rate, data, logging, "
                    "checkpoints, launcher): {}",
                    names.size(), fmt::join(names, ", "));
    core::diagnose("note", "note: " + message, message);
  }
}

} // namespace

int import_config(const ImportArgs& a, const CommonOptions& o)
{
  const fs::path out = a.out;
  const fs::path scenario_dir = out.parent_path();
  importer::Target target;
  target.topology = reference_from(a.topology, scenario_dir);
  target.gpus = a.gpus;
  target.name = a.name.empty() ? (a.out.empty() ? "imported-" + a.framework : out.stem().string()) : a.name;

  importer::Imported imported;
  if (a.framework == "megatron") {
    imported = importer::import_megatron(a.arguments, target);
  } else if (a.framework == "nemo") {
    std::optional<importer::GivenModel> model;
    if (!a.model.empty())
      model = importer::GivenModel{reference_from(a.model, scenario_dir),
                                   scenario::load_model(a.model, load_options(o)).num_layers};
    imported = importer::import_nemo(importer::read_yaml_file(a.config), core::display_path(a.config), target,
                                     a.arguments, model);
  } else if (a.framework == "deepspeed") {
    const core::Json config = core::read_json_file(a.config);
    core::Provenance provenance;
    provenance.add_source("", core::display_path(a.config));
    importer::DeepSpeedOptions options{reference_from(a.model, scenario_dir), a.seq_length, a.micro_batch,
                                       a.global_batch};
    imported = importer::import_deepspeed(core::Node(config, "", provenance), target, options);
  } else if (a.framework == "hf") {
    const core::Json args =
        a.config.empty() ? importer::hf_arguments_json(a.arguments) : core::read_json_file(a.config);
    core::Provenance provenance;
    provenance.add_source("", a.config.empty() ? std::string("Trainer arguments") : core::display_path(a.config));
    const importer::HfTrainerOptions options{reference_from(a.model, scenario_dir), a.seq_length,
                                             a.config.empty() ? fs::path() : fs::path(a.config).parent_path()};
    imported = importer::import_hf_trainer(core::Node(args, "", provenance), target, options);
  } else if (a.framework == "accelerate") {
    const core::Json config = importer::typed_scalars(importer::read_yaml_file(a.config));
    const core::Json args = importer::hf_arguments_json(a.arguments);
    core::Provenance provenance;
    provenance.add_source("", core::display_path(a.config));
    core::Provenance trainer_provenance;
    trainer_provenance.add_source("", "Trainer arguments");
    const importer::HfTrainerOptions options{reference_from(a.model, scenario_dir), a.seq_length,
                                             fs::path(a.config).parent_path()};
    imported = importer::import_accelerate(core::Node(config, "", provenance), core::Node(args, "", trainer_provenance),
                                           target, options);
  } else if (a.framework == "llamafactory") {
    const core::Json config = importer::typed_scalars(importer::read_yaml_file(a.config));
    core::Provenance provenance;
    provenance.add_source("", core::display_path(a.config));
    const importer::HfTrainerOptions options{reference_from(a.model, scenario_dir), a.seq_length,
                                             fs::path(a.config).parent_path()};
    imported = importer::import_llamafactory(core::Node(config, "", provenance), target, options);
  } else {
    const core::Json job = importer::read_toml_file(a.config);
    core::Provenance provenance;
    provenance.add_source("", core::display_path(a.config));
    imported =
        importer::import_torchtitan(core::Node(job, "", provenance), target, reference_from(a.model, scenario_dir));
  }

  report(imported, a.framework);
  // The scenario must be one that `check` accepts and `run` simulates.
  const fs::path as_file = a.out.empty() ? fs::path("<standard output>") : out;
  try {
    const auto s = scenario::load_scenario(core::Json::parse(imported.scenario.dump()), as_file, load_options(o));
    if (!o.allow_oom)
      scenario::refuse_out_of_memory(s);
    print_warnings(s.warnings);
  } catch (const core::InputError& e) {
    const std::string from = origin_of(imported, e.where().pointer);
    core::diagnose("note",
                   fmt::format("note: the imported scenario was refused and not written{}",
                               from.empty() ? "" : fmt::format(" ({} came from {})", e.where().pointer, from)),
                   "the imported scenario was refused and not written");
    // Named by the input (the scenario exists nowhere else): its pointer is the scenario's.
    std::string message = e.what();
    if (const std::string at = core::format_location(e.where()); message.starts_with(at + ": "))
      message = message.substr(at.size() + 2);
    throw core::InputError({core::display_path(a.config), "", ""},
                           fmt::format("the scenario imported from it, at {}: {}", e.where().pointer, message));
  }
  if (a.strict && !imported.not_simulated.empty())
    throw core::InputError(core::Location{a.framework + " import", "", ""},
                           fmt::format("{} settings were not carried over (--strict)", imported.not_simulated.size()),
                           core::clip(imported.not_simulated.front().setting, 60), "every setting understood");

  const std::string text = imported.scenario.dump(2) + "\n";
  if (a.out.empty()) {
    std::cout << text;
    return 0;
  }
  std::ofstream file(out);
  if (!(file << text))
    throw core::InputError(core::Location{"--out", "", ""}, "cannot write the scenario", a.out,
                           "a file that can be written");
  core::diagnose("note", fmt::format("wrote {} (simtrain run {})", a.out, a.out), "wrote " + a.out);
  return 0;
}

} // namespace sim::cli
