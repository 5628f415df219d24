#include "importer/imported.hpp"

#include "core/document.hpp"

#include <fmt/format.h>

namespace sim::importer {

std::string spelt(const core::Node& n)
{
  return fmt::format("{} {}", n.pointer(), core::clip(n.json().dump(), 60));
}

void add_accounts(Imported& to, Imported&& from)
{
  for (auto& s : from.no_effect)
    to.no_effect.push_back(std::move(s));
  for (auto& s : from.not_simulated)
    to.not_simulated.push_back(std::move(s));
  for (auto& a : from.assumptions)
    to.assumptions.push_back(std::move(a));
  for (auto& o : from.origins)
    to.origins.push_back(std::move(o));
}

void set_scenario(Imported& out, const Target& target, const std::string& framework, const std::string& file,
                  const std::string& model, OrderedJson plan)
{
  OrderedJson s;
  s["schema"] = "scenario/v1";
  s["name"] = target.name;
  s["description"] = fmt::format("Imported by simtrain import {} from {}", framework, file);
  s["model"] = model;
  s["topology"] = target.topology;
  s["gpus"] = target.gpus.value_or(0);
  s["plan"] = std::move(plan);
  out.origins.emplace_back("/gpus", "--gpus");
  out.scenario = std::move(s);
}

} // namespace sim::importer
