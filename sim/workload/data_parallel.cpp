#include "workload/builder_rooms.hpp"
#include "workload/optimizer_step.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace sim::workload {
namespace {

using plan::Pass;

} // namespace

DataParallel::Gathered DataParallel::gather_parameters(int s, int item, const Where& w)
{
  Gathered ends;
  auto gather = [&](const std::vector<int>& group, double bytes, const char* label) {
    const auto members = b_.simulated_of(group);
    std::vector<TaskId> deps = b_.tails_of(members);
    for (int r : members) {
      auto& gathered = b_.gather_tail[static_cast<std::size_t>(r)];
      deps.push_back(gathered);
      if (p_.offload_params != plan::OffloadDevice::NONE) {
        // The GPU's shard comes up from host memory first, once the gather before has ended (one ahead); from
        // NVMe it is read into a host buffer before that.
        auto& fetched = b_.fetch_tail[static_cast<std::size_t>(r)];
        const double shard = bytes / static_cast<double>(group.size());
        std::vector<TaskId> before{fetched, gathered};
        if (p_.offload_params == plan::OffloadDevice::NVME)
          before = {b_.nvme_copy(r, shard, true, std::string(label) + ": shard from nvme", w, before)};
        fetched = b_.host_copy(r, shard / pinned_copy_efficiency, copy_from_host,
                               std::string(label) + ": shard from host", w, before);
        deps.push_back(fetched);
      }
    }
    const TaskId end = b_.collective(CollectiveKind::ALL_GATHER, group, bytes, Category::DP, label, w, deps);
    for (int r : members)
      b_.gather_tail[static_cast<std::size_t>(r)] = end;
    return end;
  };
  if (p_.shards() > 1)
    for (const auto& group : b_.groups(Dim::SHARD, s)) {
      // One gather per parameter tensor (DeepSpeed of 2021, each after a device synchronisation), or per item;
      // each waits for the one before, so the last ends them all.
      TaskId end = no_task;
      // FP8 parameters (torchao's float8 all-gather) travel in one byte: the layers' matrices, not the embedding.
      const double bytes = (item >= 0 || is_mtp(item)) && p_.fp8_param_gather ? 1.0 : p_.value_bytes();
      for (double share : tensor_shares(item))
        end = gather(group, share * b_.item_gather_bytes(item, s, bytes), "zero-3 parameter all-gather");
      for (int r : b_.simulated_of(group))
        ends[r].push_back(end);
    }
  if (b_.item_expert_params(item) > 0 && p_.edp() > 1)
    for (const auto& group : b_.groups(Dim::EDP, s)) {
      const TaskId end =
          gather(group, p_.value_bytes() * b_.item_expert_params(item), "zero-3 expert parameter all-gather");
      for (int r : b_.simulated_of(group))
        ends[r].push_back(end);
    }
  return ends;
}

// How an item's parameters split into the tensors a per-tensor ZeRO-3 gathers and reduces one by one: a layer's
// weight matrices (biases and norms, below DeepSpeed's persistence threshold, stay gathered and ride with the
// largest), the embedding or output matrix whole.
std::vector<double> DataParallel::tensor_shares(int item) const
{
  if (!p_.software.zero3_per_tensor || item < 0)
    return {1.0};
  const double h = static_cast<double>(m_.hidden_size);
  const double q = static_cast<double>(m_.q_width());
  const double kv = static_cast<double>(m_.kv_width());
  const double f = static_cast<double>(m_.ffn_hidden_size);
  std::vector<double> weights{h * (q + 2.0 * kv), q * h, f * h};
  if (model::is_gated(m_.ffn_kind))
    weights.push_back(f * h);
  weights.push_back(f * h);
  double total = 0;
  for (double x : weights)
    total += x;
  for (double& x : weights)
    x /= total;
  return weights;
}

// Stage s's items in the order their gradients are ready (the last chunk's first).
std::vector<int> DataParallel::gradient_order(int s) const
{
  std::vector<int> order;
  for (int c = p_.virtual_stages - 1; c >= 0; --c)
    for (int item : b_.pass_items(virtual_stage(p_, s, c), Pass::BACKWARD))
      order.push_back(item);
  return order;
}

// DeepSpeed's engine all-reduces even with ZeRO-1 (the stage keeps its partition of the result), after the flush.
CollectiveKind DataParallel::gradient_reduction() const
{
  return b_.sharded_optimizer() && !b_.deepspeed_engine() ? CollectiveKind::REDUCE_SCATTER : CollectiveKind::ALL_REDUCE;
}

// Where the dense gradients are reduced: a reduce-scatter within each shard group (then all-reduced shard by shard
// across the groups, as FSDP's HYBRID_SHARD and Megatron-core's optimizer instances do), or an all-reduce over all
// data-parallel ranks.
DataParallel::Dim DataParallel::reduction_dim() const
{
  return gradient_reduction() == CollectiveKind::REDUCE_SCATTER ? Dim::SHARD : Dim::DP;
}

void DataParallel::check_gradient_reductions()
{
  if (!b_.folding || p_.dp_cp() == 1)
    return;
  for (int s = 0; s < p_.pp; ++s) {
    const auto order = gradient_order(s);
    for (bool experts : {false, true}) {
      if (experts && p_.edp() <= 1)
        continue;
      for (const auto& bucket : buckets(order, s, {.experts = experts})) {
        const Dim dim = experts ? Dim::EDP : reduction_dim();
        for (const auto& group : b_.groups(dim, s))
          b_.phases(gradient_reduction(), group, bucket.second * b_.grad_bytes);
        if (dim == Dim::SHARD && p_.shard_replicas() > 1)
          for (const auto& group : b_.groups(Dim::REPLICA, s))
            b_.phases(CollectiveKind::ALL_REDUCE, group, bucket.second / p_.shards() * b_.grad_bytes);
      }
    }
  }
}

void DataParallel::offload_gradients(int s, const std::vector<int>& items, double shard, const std::string& label,
                                     const Where& w)
{
  shard *= p_.offload_fraction;
  // Reduced every micro-batch (ZeRO-2/3), the gradients accumulate on the host through the GPU, as DeepSpeed's
  // async_accumulate_grad_in_cpu_via_gpu does: before the last micro-batch each copies its 16-bit gradients out, from
  // the second on after adding the host's sum copied back in; the last micro-batch's sum goes out in fp32.
  const int mb = w.microbatch;
  const bool first = mb <= 0;
  const bool last = mb < 0 || mb == p_.microbatches() - 1;
  for (int r : b_.stage_gpus(s)) {
    auto& copies = b_.offload_tail[static_cast<std::size_t>(r)];
    std::vector<TaskId> deps{b_.reduce_tail[static_cast<std::size_t>(r)], copies};
    for (int item : items)
      deps.push_back(b_.grad_ready[static_cast<std::size_t>(r)].at(item));
    if (!first) {
      auto& fetched = b_.fetch_tail[static_cast<std::size_t>(r)];
      fetched = b_.host_copy(r, shard * p_.value_bytes() / pinned_copy_efficiency, copy_from_host,
                             label + ": accumulated gradients from host", w, {deps.front(), fetched});
      deps.push_back(fetched);
    }
    const double bytes = last ? offload_copy_bytes_per_param : p_.value_bytes() / pinned_copy_efficiency;
    copies = b_.host_copy(r, shard * bytes, copy_to_host, label + " to host", w, deps);
  }
}

void DataParallel::reduce_gradients(int s, int mb)
{
  const bool offload = p_.offload_optimizer != plan::OffloadDevice::NONE && !offload_at_step(p_);
  if (p_.dp_cp() == 1) {
    if (offload) // nothing to reduce: each bucket goes to the host as its gradients are done
      for (const auto& [items, params] : buckets(gradient_order(s), s))
        offload_gradients(s, items, params, "gradient bucket", {Category::DP, s, -1, mb, -1});
    return;
  }
  const std::vector<int> order = gradient_order(s);
  const CollectiveKind kind = gradient_reduction();
  const bool after_flush = !p_.overlap_grad_reduce || b_.deepspeed_engine();
  const Where w{Category::DP, s, -1, mb, -1};
  // The dense parameters' buckets over the data-parallel groups and the routed experts' over the expert-data-
  // parallel groups, issued on one stream in the order their last item's gradients are ready.
  const auto dense = buckets(order, s);
  const auto experts = p_.edp() > 1 ? buckets(order, s, {.experts = true}) : decltype(dense){};
  auto last_position = [&](const std::vector<int>& items) {
    return std::find(order.begin(), order.end(), items.back()) - order.begin();
  };
  std::size_t di = 0;
  std::size_t ei = 0;
  while (di < dense.size() || ei < experts.size()) {
    const bool expert = di == dense.size() ||
                        (ei < experts.size() && last_position(experts[ei].first) < last_position(dense[di].first));
    const auto& [items, params] = expert ? experts[ei] : dense[di];
    const std::string label =
        expert ? fmt::format("expert gradient bucket {}", ei) : fmt::format("dp gradient bucket {}", di);
    const Dim dim = expert ? Dim::EDP : reduction_dim();
    for (const auto& group : b_.groups(dim, s)) {
      const auto members = b_.simulated_of(group);
      std::vector<TaskId> deps;
      for (int r : members) {
        deps.push_back(b_.reduce_tail[static_cast<std::size_t>(r)]);
        for (int item : items)
          deps.push_back(b_.grad_ready[static_cast<std::size_t>(r)].at(item));
        if (after_flush)
          for (TaskId t2 : b_.tail[static_cast<std::size_t>(r)])
            deps.push_back(t2);
      }
      const TaskId end = b_.collective(kind, group, params * b_.grad_bytes, Category::DP, label, w, deps);
      for (int r : members)
        b_.reduce_tail[static_cast<std::size_t>(r)] = end;
    }
    if (dim == Dim::SHARD && p_.shard_replicas() > 1)
      for (const auto& group : b_.groups(Dim::REPLICA, s)) {
        const auto members = b_.simulated_of(group);
        const TaskId end = b_.collective(CollectiveKind::ALL_REDUCE, group, params / p_.shards() * b_.grad_bytes,
                                         Category::DP, label + " across shard groups", w, reduce_tails(members));
        for (int r : members)
          b_.reduce_tail[static_cast<std::size_t>(r)] = end;
      }
    if (offload) // each GPU's shard of the reduced bucket to host memory
      offload_gradients(s, items, params / (expert ? p_.edp() : p_.shards()), label, w);
    ++(expert ? ei : di);
  }
}

std::vector<TaskId> DataParallel::reduce_tails(const std::vector<int>& gpus) const
{
  std::vector<TaskId> out;
  for (int r : gpus)
    out.push_back(b_.reduce_tail[static_cast<std::size_t>(r)]);
  return out;
}

// Items of stage s in `order`, grouped into data-parallel buckets of at least dp_bucket_size worth of gradients
// (the last may be smaller), each with its parameter count: of the parameters every replica holds, or of the
// routed experts (`experts`; items without experts are left out).
std::vector<std::pair<std::vector<int>, double>> DataParallel::buckets(const std::vector<int>& order, int s,
                                                                       const BucketOptions& options) const
{
  const bool experts = options.experts;
  const double bucket_params = p_.dp_bucket_bytes / b_.grad_bytes;
  std::vector<std::pair<std::vector<int>, double>> out;
  for (int item : order) {
    if (experts) {
      if (b_.item_expert_params(item) <= 0)
        continue;
      if (out.empty() || out.back().second >= bucket_params)
        out.emplace_back();
      out.back().first.push_back(item);
      out.back().second += b_.item_expert_params(item);
      continue;
    }
    const double params = b_.item_trainable_params(item, s);
    if (params <= 0) // frozen (LoRA's base): no gradient
      continue;
    if (p_.zero_stage >= 3 && p_.software.zero3_per_tensor) { // one reduce-scatter per tensor
      for (double share : tensor_shares(item))
        out.push_back({{item}, share * params});
      continue;
    }
    if (out.empty() || out.back().second >= bucket_params)
      out.emplace_back();
    out.back().first.push_back(item);
    out.back().second += params;
  }
  return out;
}

bool DataParallel::gathers_before_forward() const
{
  return p_.offload_optimizer == plan::OffloadDevice::NONE && p_.overlap_param_gather && b_.sharded_optimizer() &&
         p_.zero_stage < 3 && p_.shards() > 1;
}

void DataParallel::gather_updated_parameters(int s)
{
  std::vector<int> order;
  for (int c = 0; c < p_.virtual_stages; ++c)
    for (int item : b_.pass_items(virtual_stage(p_, s, c), Pass::FORWARD))
      order.push_back(item);
  const Where w{Category::DP, s, -1, -1, -1};
  // The dense parameters' buckets over the data-parallel groups, then the routed experts' over the expert-data-
  // parallel groups; an item is ready when both of its buckets are.
  for (const bool experts : {false, true}) {
    if (experts && p_.edp() == 1)
      break;
    const auto all = buckets(order, s, {.experts = experts});
    for (std::size_t bucket = 0; bucket < all.size(); ++bucket) {
      const auto& [items, params] = all[bucket];
      for (const auto& group : b_.groups(experts ? Dim::EDP : Dim::SHARD, s)) {
        const auto members = b_.simulated_of(group);
        std::vector<TaskId> deps;
        for (int r : members)
          deps.push_back(b_.gather_tail[static_cast<std::size_t>(r)]);
        const TaskId end =
            b_.collective(CollectiveKind::ALL_GATHER, group, p_.value_bytes() * params, Category::DP,
                          fmt::format("{}parameter all-gather, bucket {}", experts ? "expert " : "", bucket), w, deps);
        for (int r : members) {
          b_.gather_tail[static_cast<std::size_t>(r)] = end;
          for (int item : items) {
            auto& ready = b_.params_ready[static_cast<std::size_t>(r)][item];
            ready = experts ? b_.sync(Category::DP, {ready, end}) : end;
          }
        }
      }
    }
  }
}

void DataParallel::reduce_copies()
{
  if (p_.schedule != plan::Schedule::DUALPIPE)
    return;
  const Where w{Category::DP, -1, -1, -1, -1};
  for (int s = 0; s < p_.pp / 2; ++s) {
    const int mirror = p_.pp - 1 - s;
    std::vector<int> items;
    double params = 0;
    for (int c = 0; c < p_.virtual_stages; ++c)
      for (int item : b_.pass_items(virtual_stage(p_, s, c), Pass::FORWARD)) {
        items.push_back(item);
        params += b_.item_trainable_params(item, s) + b_.item_expert_params(item);
      }
    for (int d : b_.dp_simulated())
      for (int t : b_.tp_simulated()) {
        const std::vector<int> pair{b_.rank(t, d, s), b_.rank(t, d, mirror)};
        std::vector<TaskId> deps;
        for (int r : pair) {
          deps.push_back(b_.reduce_tail[static_cast<std::size_t>(r)]);
          for (int item : items)
            deps.push_back(b_.grad_ready[static_cast<std::size_t>(r)].at(item));
        }
        const TaskId end = b_.collective(CollectiveKind::ALL_REDUCE, pair, params * b_.grad_bytes, Category::DP,
                                         "model copies' gradient all-reduce", w, deps);
        for (int r : pair)
          b_.reduce_tail[static_cast<std::size_t>(r)] = end;
      }
  }
}

void DataParallel::reduce_tied_embedding()
{
  if (!(m_.tie_embeddings || m_.mtp_layers > 0) || p_.pp == 1 || p_.dualpipe())
    return;
  const Where w{Category::DP, -1, -1, -1, -1};
  for (int d : b_.dp_simulated())
    for (int t : b_.tp_simulated()) {
      const std::vector<int> group{b_.rank(t, d, 0), b_.rank(t, d, p_.pp - 1)};
      std::vector<TaskId> deps;
      for (int r : group) {
        deps.push_back(b_.reduce_tail[static_cast<std::size_t>(r)]);
        deps.push_back(b_.grad_ready[static_cast<std::size_t>(r)].at(r == group[0] ? embedding_item : head_item));
      }
      const TaskId end =
          b_.collective(CollectiveKind::ALL_REDUCE, group, b_.counts.word_embedding / p_.tp * b_.grad_bytes,
                        Category::DP, "embedding gradient all-reduce", w, deps);
      for (int r : group)
        b_.reduce_tail[static_cast<std::size_t>(r)] = end;
    }
}

} // namespace sim::workload
