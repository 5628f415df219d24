#include "study/layouts.hpp"

#include "core/input_error.hpp"
#include "plan/plan_rules.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <utility>

namespace sim::study {
namespace {

// Splits at `sep` outside brackets, braces and double quotes.
std::vector<std::string> split_values(const std::string& text, char sep = ',')
{
  std::vector<std::string> out;
  std::string current;
  int depth = 0;
  bool quoted = false;
  for (char c : text) {
    if (c == '"')
      quoted = !quoted;
    else if (!quoted && (c == '[' || c == '{'))
      ++depth;
    else if (!quoted && (c == ']' || c == '}'))
      --depth;
    if (c == sep && depth == 0 && !quoted) {
      out.push_back(current);
      current.clear();
      continue;
    }
    current += c;
  }
  out.push_back(current);
  return out;
}

// Expert layouts to try on tp x dp GPUs of a stage (dp: its data- and context-parallel ranks), as (ep, etp): experts
// split like the attention (etp = tp) or whole (etp = 1) where the expert FFN allows it, and expert-parallel sizes that
// are powers of two dividing the GPUs left and the expert count. A dense model has one: (1, tp).
std::vector<std::pair<int, int>> expert_layouts(const model::ModelSpec& m, int tp, int dp)
{
  if (!m.moe)
    return {{1, tp}};
  std::vector<std::pair<int, int>> out;
  for (int etp : tp > 1 ? std::vector<int>{tp, 1} : std::vector<int>{1}) {
    if (!plan::etp_splits_expert_ffn(*m.moe, etp))
      continue;
    const int left = tp * dp / etp; // the most expert-parallel ranks
    for (int ep = 1; ep <= left; ep *= 2)
      if (plan::experts_tile_stage(tp * dp, ep, etp) && plan::ep_splits_experts(*m.moe, ep))
        out.emplace_back(ep, etp);
  }
  return out;
}

// Context-parallel sizes to try: powers of two leaving each GPU at least 4K tokens of a sequence (so short sequences
// try none), for the models simtrain runs context parallelism on (without MLA or sliding windows).
std::vector<int> context_parallel_sizes(const model::ModelSpec& m, std::int64_t seq_length)
{
  std::vector<int> out{1};
  if (!m.mla && m.sliding_window == 0)
    for (int cp = 2; seq_length / cp >= 4096 && plan::cp_splits_sequence(seq_length, cp); cp *= 2)
      out.push_back(cp);
  return out;
}

// ZeRO stages to try: 0-1, and 2-3 (which shard the gradients) where the plan allows them and not under FP8.
std::vector<int> zero_stages(int pp, int cp, bool fp8)
{
  std::vector<int> out;
  for (int zero = 0; zero <= 3; ++zero)
    if (plan::zero_stage_combines(zero, pp, cp) && !(fp8 && plan::zero_shards_gradients(zero)))
      out.push_back(zero);
  return out;
}

} // namespace

std::string override_path(const std::string& expression)
{
  return expression.substr(0, expression.find('='));
}

std::string override_value(const std::string& expression)
{
  const auto eq = expression.find('=');
  return eq == std::string::npos ? "" : expression.substr(eq + 1);
}

std::string short_name(const std::string& path)
{
  const auto dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

std::string layout_label(const Layout& layout)
{
  std::string out;
  for (const auto& e : layout.overrides) {
    std::string value = override_value(e);
    if (value == "null")
      continue;
    if (!out.empty())
      out += ' ';
    out += short_name(override_path(e)) + "=" + value;
  }
  return out;
}

std::vector<Layout> vary_layouts(const std::vector<std::string>& specs)
{
  std::vector<Layout> layouts{Layout{}};
  for (const auto& spec : specs) {
    const auto eq = spec.find('=');
    const auto paths = split_values(spec.substr(0, eq), ':');
    const auto values = eq == std::string::npos ? std::vector<std::string>{} : split_values(spec.substr(eq + 1));
    const auto empty = [](const std::string& v) { return v.empty(); };
    bool ok = !values.empty() && std::none_of(paths.begin(), paths.end(), empty);
    std::vector<std::vector<std::string>> tuples; // one value per path
    for (const auto& v : values) {
      tuples.push_back(split_values(v, ':'));
      ok =
          ok && tuples.back().size() == paths.size() && std::none_of(tuples.back().begin(), tuples.back().end(), empty);
    }
    if (!ok)
      throw core::InputError({"--vary " + spec, "", ""}, "not a variation", spec,
                             "PATH=V1,V2,... such as plan.tp=2,4,8, or linked paths P1:P2=A1:A2,B1:B2");
    std::vector<Layout> next;
    for (const auto& l : layouts)
      for (const auto& tuple : tuples) {
        Layout x = l;
        for (std::size_t i = 0; i < paths.size(); ++i)
          x.overrides.push_back(paths[i] + "=" + tuple[i]);
        next.push_back(x);
      }
    layouts = std::move(next);
  }
  return layouts;
}

std::vector<Layout> auto_layouts(const scenario::Scenario& base)
{
  const auto& m = base.model;
  const int gpus = base.gpus;
  const std::int64_t global_batch = base.plan.global_batch;
  std::vector<Layout> out;
  for (int tp = 1; tp <= base.cluster.node.gpus && tp <= gpus; tp *= 2) {
    if (!plan::tp_splits_model(m, tp))
      continue;
    for (const int cp : context_parallel_sizes(m, base.plan.seq_length))
      for (int pp = 1; plan::layers_fill_chunks(m, pp) && tp * pp * cp <= gpus; ++pp) {
        if (gpus % (tp * pp * cp) != 0)
          continue;
        const int dp = gpus / (tp * pp * cp);
        for (int mbs : {1, 2, 4, 8, 16}) {
          if (!plan::batch_splits(global_batch, mbs, dp))
            continue;
          const std::int64_t microbatches = global_batch / dp / mbs;
          std::vector<std::pair<std::string, int>> schedules{{"1f1b", 1}};
          if (pp > 1) // interleaved chunks of equal layers only
            for (int v : {2, 4})
              if (m.num_layers % (pp * v) == 0 && plan::interleaving_splits_microbatches(microbatches, pp))
                schedules.emplace_back("interleaved", v);
          for (const auto& [schedule, v] : schedules)
            for (const int zero : zero_stages(pp, cp, base.plan.fp8()))
              for (const char* recompute : {"none", "selective", "full"})
                for (bool sp : tp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false})
                  for (const auto& [ep, etp] : expert_layouts(m, tp, dp * cp)) {
                    if (plan::needs_sequence_parallel(m, tp) && !sp)
                      continue;
                    Layout l{{fmt::format("plan.tp={}", tp), fmt::format("plan.pp={}", pp),
                              fmt::format("plan.dp={}", dp), fmt::format("plan.micro_batch={}", mbs),
                              fmt::format("plan.schedule={}", schedule), fmt::format("plan.virtual_stages={}", v),
                              fmt::format("plan.zero_stage={}", zero), fmt::format("plan.recompute={}", recompute),
                              fmt::format("plan.sequence_parallel={}", sp ? "true" : "false"),
                              "plan.distributed_optimizer=null", "plan.layers_per_stage=null"}};
                    if (m.moe) {
                      l.overrides.push_back(fmt::format("plan.ep={}", ep));
                      l.overrides.push_back(fmt::format("plan.etp={}", etp));
                    }
                    if (base.plan.fp8_param_gather) // needs the distributed optimizer, which layouts leave out
                      l.overrides.emplace_back("plan.fp8_param_gather=null");
                    // The scenario's recomputed modules where the layout recomputes selectively, none otherwise.
                    if (base.plan.recompute_modules != model::RecomputeModules{} &&
                        std::string_view(recompute) != "selective")
                      l.overrides.emplace_back("plan.recompute_modules=null");
                    // The scenario's hybrid shard groups where the layout shards and they split its data-parallel
                    // ranks; sharding over all of them otherwise.
                    if (const int group = base.plan.shard_group;
                        group > 0 && (zero == 0 || (dp * cp) % group != 0 || dp * cp == group))
                      l.overrides.emplace_back("plan.shard_group=null");
                    if (cp > 1 || base.plan.cp > 1)
                      l.overrides.push_back(fmt::format("plan.cp={}", cp));
                    out.push_back(std::move(l));
                  }
        }
      }
  }
  return out;
}

std::vector<Layout> combine(const std::vector<Layout>& a, const std::vector<Layout>& b)
{
  if (a.empty())
    return b;
  if (b.empty())
    return a;
  std::vector<Layout> out;
  for (const auto& x : a)
    for (const auto& y : b) {
      Layout l;
      bool agree = true;
      for (const auto& e : x.overrides) {
        const auto same = std::find_if(y.overrides.begin(), y.overrides.end(),
                                       [&](const std::string& f) { return override_path(f) == override_path(e); });
        if (same == y.overrides.end())
          l.overrides.push_back(e);
        else
          agree = agree && override_value(*same) == override_value(e);
      }
      if (!agree)
        continue;
      l.overrides.insert(l.overrides.end(), y.overrides.begin(), y.overrides.end());
      out.push_back(l);
    }
  return out;
}

} // namespace sim::study
