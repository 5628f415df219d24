#include "plan/lora.hpp"

namespace sim::plan {

std::vector<Adapter> lora_adapters(const model::ModelSpec& m, const ParallelPlan& p, LinearSite site)
{
  const auto h = static_cast<double>(m.hidden_size);
  const auto f = static_cast<double>(m.ffn_hidden_size);
  std::vector<Adapter> out;
  auto add = [&](LoraTarget t, double in, double width) {
    if (p.lora_targets.has(t))
      out.push_back({in, width});
  };
  switch (site) {
    case LinearSite::QKV:
      add(LoraTarget::Q, h, static_cast<double>(m.q_width()));
      add(LoraTarget::K, h, static_cast<double>(m.kv_width()));
      add(LoraTarget::V, h, static_cast<double>(m.kv_width()));
      add(LoraTarget::LINEAR_QKV, h, static_cast<double>(m.q_width() + 2 * m.kv_width()));
      break;
    case LinearSite::PROJ:
      add(LoraTarget::O, static_cast<double>(m.o_width()), h);
      add(LoraTarget::LINEAR_PROJ, static_cast<double>(m.o_width()), h);
      break;
    case LinearSite::FC1:
      if (model::is_gated(m.ffn_kind))
        add(LoraTarget::GATE, h, f);
      add(LoraTarget::UP, h, f);
      add(LoraTarget::LINEAR_FC1, h, model::is_gated(m.ffn_kind) ? 2.0 * f : f);
      break;
    case LinearSite::FC2:
      add(LoraTarget::DOWN, f, h);
      add(LoraTarget::LINEAR_FC2, f, h);
      break;
  }
  return out;
}

double lora_layer_params(const model::ModelSpec& m, const ParallelPlan& p)
{
  if (!p.lora())
    return 0.0;
  double params = 0;
  for (auto site : {LinearSite::QKV, LinearSite::PROJ, LinearSite::FC1, LinearSite::FC2})
    for (const Adapter& a : lora_adapters(m, p, site))
      params += p.lora_rank * (a.in + a.out);
  return params;
}

double base_weight_bytes(BaseQuantization q, double value_bytes)
{
  return q == BaseQuantization::NF4 ? 0.5 + 1.0 / 64 + 4.0 / (64.0 * 256.0) : value_bytes;
}

} // namespace sim::plan
