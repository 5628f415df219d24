// ZeRO-Offload: the optimizer's state in host memory (its verdict per node), the plan's checks, and the copies and the
// CPU's update in the step's task graph.
#include "memory/memory_model.hpp"
#include "scenario/feasibility.hpp"
#include "scenario/scenario.hpp"
#include "workload/optimizer_step.hpp"

#include "build_support.hpp"
#include "support.hpp"

namespace {

using sim::workload::TaskKind;

sim::scenario::Scenario llama7b(nlohmann::json plan, const std::string& topology = "pcie-4090",
                                std::vector<std::string> overrides = {})
{
  nlohmann::json doc = {
      {"schema", "scenario/v1"}, {"model", "llama2-7b"}, {"topology", topology}, {"gpus", 8}, {"plan", plan}};
  const auto file = test::write_json(test::scratch_dir() / "offload.json", doc);
  return sim::scenario::load_scenario(file, test::options(std::move(overrides)));
}

const nlohmann::json zero2 = {{"dp", 8},         {"global_batch", 8},          {"seq_length", 512},
                              {"zero_stage", 2}, {"offload_optimizer", "cpu"}, {"recompute", "full"}};

} // namespace

TEST_CASE("ZeRO-Offload keeps each GPU's Adam shard and an fp32 gradient shard in its node's memory")
{
  const auto s = llama7b(zero2);
  const auto m = sim::memory::estimate_memory(s.model, s.plan, s.cluster);
  const auto& st = m.per_stage.front();
  const double shard = st.params / 8;
  CHECK(st.optimizer_bytes == 0);
  CHECK(st.grads_bytes == 0); // ZeRO-2: the GPU keeps only the bucket being reduced
  CHECK(st.host_bytes == Approx((12.0 + 4.0) * shard));
  CHECK(m.host_node_bytes == Approx(8 * st.host_bytes));
  CHECK(m.host_capacity_bytes == s.cluster.node.host.memory_bytes);
  CHECK_FALSE(m.host_oom);
  // On the GPU: the 16-bit weights, which ZeRO-2 does not shard.
  CHECK(st.weights_bytes == Approx(2.0 * st.params));
  // Without offload the same state is on the GPU.
  auto on_gpu = zero2;
  on_gpu["offload_optimizer"] = "none";
  const auto g = sim::memory::estimate_memory(s.model, llama7b(on_gpu).plan, s.cluster);
  CHECK(g.per_stage.front().optimizer_bytes == Approx(12.0 * shard));
  CHECK(g.per_stage.front().host_bytes == 0);
  CHECK(g.host_node_bytes == 0);
}

TEST_CASE("a plan whose offloaded state overflows the node's memory is refused with the numbers")
{
  const auto s = llama7b(zero2, "pcie-4090", {"topology.node.host.memory=64GB"});
  const auto m = sim::memory::estimate_memory(s.model, s.plan, s.cluster);
  CHECK(m.host_oom);
  CHECK_FALSE(m.oom);
  const auto error = test::error_of([&] { sim::scenario::refuse_out_of_memory(s, ""); });
  CHECK_THAT(error, Catch::Contains("does not fit in host memory"));
  CHECK_THAT(error, Catch::Contains("100.41 GiB"));
}

TEST_CASE("offloading the optimizer needs ZeRO and a topology that describes its hosts")
{
  auto no_zero = zero2;
  no_zero["zero_stage"] = 0;
  CHECK_THAT(test::error_of([&] { llama7b(no_zero); }), Catch::Contains("the plan has neither"));
  CHECK_THAT(test::error_of([&] { llama7b(zero2, "hgx-a800"); }), Catch::Contains("does not describe its hosts"));
  // The delayed update is ZeRO-Offload's: the optimizer on the CPU, the parameters on the GPUs.
  auto delayed = zero2;
  delayed["delayed_update"] = true;
  CHECK_NOTHROW(llama7b(delayed));
  delayed["offload_optimizer"] = "none";
  CHECK_THAT(test::error_of([&] { llama7b(delayed); }), Catch::Contains("the plan has offload_optimizer none"));
  delayed["offload_optimizer"] = "cpu";
  delayed["zero_stage"] = 3;
  delayed["offload_params"] = "cpu";
  CHECK_THAT(test::error_of([&] { llama7b(delayed); }), Catch::Contains("the plan offloads them too"));
}

TEST_CASE("ZeRO-Offload's step: each reduced bucket's shard to the host, the CPU's update, the shard back, the gather")
{
  const nlohmann::json tiny = {
      {"schema", "model/v1"},      {"name", "tiny"},      {"num_layers", 4},   {"hidden_size", 1024},
      {"num_attention_heads", 16}, {"vocab_size", 32000}, {"seq_length", 1024}};
  nlohmann::json plan{{"dp", 8}, {"global_batch", 8}, {"zero_stage", 1}, {"offload_optimizer", "cpu"}};
  const auto b = test::build(plan, tiny, "pcie-4090", false); // unfolded: every GPU's copies
  const auto& s = b.scenario;
  const double params = sim::memory::estimate_memory(s.model, s.plan, s.cluster).per_stage.front().params;
  std::vector<double> out(8, 0.0);
  std::vector<double> back(8, 0.0);
  std::vector<double> cpu(8, 0.0);
  int gpu_optimizer = 0;
  for (sim::workload::TaskId t = 0; t < b.tasks.size(); ++t) {
    const auto& task = b.tasks[t];
    if (task.kind == TaskKind::HOST_COPY)
      (task.peer == sim::workload::copy_to_host ? out : back)[static_cast<std::size_t>(task.rank)] += task.bytes;
    if (task.kind == TaskKind::HOST_COMPUTE)
      cpu[static_cast<std::size_t>(task.rank)] += task.duration_s;
    if (task.kind == TaskKind::COMPUTE && task.category == sim::workload::Category::OPTIMIZER)
      ++gpu_optimizer;
  }
  const double shard = params / 8;
  // 28 bytes of Adam per parameter, eight GPUs' processes at once on two sockets' DRAM at CPU Adam's share of it.
  const double cpu_s =
      shard * 28.0 * 8 / (sim::workload::cpu_optimizer_memory_efficiency * 2 * s.cluster.node.host.memory_bandwidth);
  for (int r = 0; r < 8; ++r) {
    CHECK(out[static_cast<std::size_t>(r)] == Approx(shard * sim::workload::offload_copy_bytes_per_param));
    CHECK(back[static_cast<std::size_t>(r)] == Approx(shard * sim::workload::offload_copy_bytes_per_param));
    CHECK(cpu[static_cast<std::size_t>(r)] == Approx(cpu_s));
  }
  CHECK(gpu_optimizer == 0);
  // fp16 adds the unscale pass over the fp32 gradient on the CPU.
  plan["precision"] = "fp16";
  CHECK(sim::workload::cpu_optimizer_bytes_per_param(test::build(plan, tiny, "pcie-4090", false).scenario.plan) ==
        36.0);
}

TEST_CASE("offloaded ZeRO-3 parameters: the shard lives on the host and comes up before every gather")
{
  nlohmann::json plan = zero2;
  plan["zero_stage"] = 3;
  plan["offload_params"] = "cpu";
  const auto s = llama7b(plan);
  const auto m = sim::memory::estimate_memory(s.model, s.plan, s.cluster);
  const auto& st = m.per_stage.front();
  CHECK(st.weights_bytes == 0);
  CHECK(st.host_bytes == Approx((12.0 + 4.0 + 2.0) * st.params / 8));

  const nlohmann::json tiny = {
      {"schema", "model/v1"},      {"name", "tiny"},      {"num_layers", 4},   {"hidden_size", 1024},
      {"num_attention_heads", 16}, {"vocab_size", 32000}, {"seq_length", 1024}};
  nlohmann::json small{{"dp", 8},
                       {"global_batch", 8},
                       {"zero_stage", 3},
                       {"zero3_per_tensor", false},
                       {"offload_optimizer", "cpu"},
                       {"offload_params", "cpu"}};
  const auto b = test::build(small, tiny, "pcie-4090", false);
  // Per GPU: every ZeRO-3 gather's whole buffer over the shard group, one eighth of it fetched from the host first.
  double gathered = 0;
  for (const auto& c : b.tasks.collectives())
    if (c.kind == sim::workload::CollectiveKind::ALL_GATHER)
      gathered += c.bytes;
  double fetched = 0;
  int copies_back = 0;
  for (sim::workload::TaskId t = 0; t < b.tasks.size(); ++t) {
    const auto& task = b.tasks[t];
    if (task.kind == TaskKind::HOST_COPY && task.peer == sim::workload::copy_from_host && task.rank == 0)
      fetched += task.bytes;
    if (task.kind == TaskKind::HOST_COPY && b.tasks.label_text(task.label) == "updated parameters from host")
      ++copies_back;
  }
  CHECK(gathered > 0);
  CHECK(fetched == Approx(gathered / 8 / sim::workload::pinned_copy_efficiency));
  CHECK(copies_back == 0); // the CPU's update writes the host's shard

  auto stage2 = plan;
  stage2["zero_stage"] = 2;
  CHECK_THAT(test::error_of([&] { llama7b(stage2); }), Catch::Contains("ZeRO-3 / FSDP makes"));
  auto gpu_optimizer = plan;
  gpu_optimizer["offload_optimizer"] = "none";
  CHECK_THAT(test::error_of([&] { llama7b(gpu_optimizer); }), Catch::Contains("offload_optimizer cpu"));
}

TEST_CASE("ZeRO-2 offload over micro-batches accumulates on the host through the GPU, as DeepSpeed does")
{
  const nlohmann::json tiny = {
      {"schema", "model/v1"},      {"name", "tiny"},      {"num_layers", 4},   {"hidden_size", 1024},
      {"num_attention_heads", 16}, {"vocab_size", 32000}, {"seq_length", 1024}};
  const nlohmann::json plan{
      {"dp", 8}, {"global_batch", 24}, {"zero_stage", 2}, {"dp_bucket_size", "1GB"}, {"offload_optimizer", "cpu"}};
  const auto b = test::build(plan, tiny, "pcie-4090", false);
  const auto& s = b.scenario;
  const double shard = sim::memory::estimate_memory(s.model, s.plan, s.cluster).per_stage.front().params / 8;
  double out = 0;
  double in = 0;
  for (sim::workload::TaskId t = 0; t < b.tasks.size(); ++t) {
    const auto& task = b.tasks[t];
    if (task.kind == TaskKind::HOST_COPY && task.rank == 0)
      (task.peer == sim::workload::copy_to_host ? out : in) += task.bytes;
  }
  // Three micro-batches: out in 16 bits twice and in fp32 once; the sum so far back in twice, then the update's fp32.
  const double eff = sim::workload::pinned_copy_efficiency;
  CHECK(out == Approx(shard * (2 + 2 + 4) / eff));
  CHECK(in == Approx(shard * (2 + 2 + 4) / eff));
}

TEST_CASE("Megatron-core's optimizer CPU offload: a fraction of the distributed optimizer's shard on the CPU")
{
  nlohmann::json plan{{"dp", 8},
                      {"global_batch", 8},
                      {"seq_length", 512},
                      {"recompute", "full"},
                      {"distributed_optimizer", true},
                      {"offload_optimizer", "cpu"},
                      {"cpu_optimizer", "pytorch"},
                      {"offload_fraction", 0.25}};
  const auto s = llama7b(plan);
  const auto m = sim::memory::estimate_memory(s.model, s.plan, s.cluster);
  const auto& st = m.per_stage.front();
  const double shard = st.params / 8;
  CHECK(st.optimizer_bytes == Approx(0.75 * 12.0 * shard));
  CHECK(st.host_bytes == Approx(0.25 * 16.0 * shard));

  const nlohmann::json tiny = {
      {"schema", "model/v1"},      {"name", "tiny"},      {"num_layers", 4},   {"hidden_size", 1024},
      {"num_attention_heads", 16}, {"vocab_size", 32000}, {"seq_length", 1024}};
  plan.erase("seq_length");
  plan.erase("recompute");
  const auto b = test::build(plan, tiny, "pcie-4090", false);
  const auto& t = b.scenario;
  const double tiny_shard = sim::memory::estimate_memory(t.model, t.plan, t.cluster).per_stage.front().params / 8;
  int out = 0;
  double out_bytes = 0;
  double cpu_s = 0;
  double gpu_optimizer_s = 0;
  for (sim::workload::TaskId id = 0; id < b.tasks.size(); ++id) {
    const auto& task = b.tasks[id];
    if (task.rank != 0)
      continue;
    if (task.kind == TaskKind::HOST_COPY && task.peer == sim::workload::copy_to_host) {
      ++out;
      out_bytes += task.bytes;
    }
    if (task.kind == TaskKind::HOST_COMPUTE)
      cpu_s += task.duration_s;
    if (task.kind == TaskKind::COMPUTE && task.category == sim::workload::Category::OPTIMIZER)
      gpu_optimizer_s += task.duration_s;
  }
  // One copy at the step (HybridDeviceOptimizer's), of the CPU's quarter; PyTorch's pace on the CPU for it, the GPU's
  // fused step for the rest.
  CHECK(out == 1);
  CHECK(out_bytes == Approx(0.25 * tiny_shard * sim::workload::offload_copy_bytes_per_param));
  CHECK(cpu_s == Approx(0.25 * tiny_shard * sim::workload::cpu_optimizer_seconds_per_param(t.plan, t.cluster)));
  CHECK(sim::workload::cpu_optimizer_seconds_per_param(t.plan, t.cluster) ==
        Approx(28.0 * 8 /
               (sim::workload::pytorch_cpu_optimizer_memory_efficiency * 2 * t.cluster.node.host.memory_bandwidth)));
  CHECK(gpu_optimizer_s > 0);
  const auto full =
      test::build({{"dp", 8}, {"global_batch", 8}, {"distributed_optimizer", true}}, tiny, "pcie-4090", false);
  double full_s = 0;
  for (sim::workload::TaskId id = 0; id < full.tasks.size(); ++id)
    if (full.tasks[id].rank == 0 && full.tasks[id].kind == TaskKind::COMPUTE &&
        full.tasks[id].category == sim::workload::Category::OPTIMIZER)
      full_s += full.tasks[id].duration_s;
  CHECK(gpu_optimizer_s == Approx(0.75 * full_s));
}

TEST_CASE("ZeRO-Infinity to NVMe: the optimizer's state on the drives, its swaps sub-group by sub-group, every tier's "
          "verdict")
{
  nlohmann::json plan = zero2;
  plan["zero_stage"] = 3;
  plan["offload_optimizer"] = "nvme";
  const auto s = llama7b(plan);
  const auto m = sim::memory::estimate_memory(s.model, s.plan, s.cluster);
  const auto& st = m.per_stage.front();
  const double shard = st.params / 8;
  // Adam's 12 bytes a parameter on the drives; the fp32 gradient shard and the swapper's four sub-group buffers
  // (the whole shard here, under the 1e9 default) in host memory.
  CHECK(st.nvme_bytes == Approx(12.0 * shard));
  CHECK(st.host_bytes == Approx(4.0 * shard + 4 * 4.0 * shard));
  CHECK(m.nvme_node_bytes == Approx(8 * st.nvme_bytes));
  CHECK(m.nvme_capacity_bytes == Approx(2 * 3.84e12));
  CHECK_FALSE(m.nvme_oom);
  // Parameters to NVMe too: their 16-bit shard leaves HBM for the drives, through five 1e8-element buffers.
  plan["offload_params"] = "nvme";
  const auto both = sim::memory::estimate_memory(s.model, llama7b(plan).plan, s.cluster).per_stage.front();
  CHECK(both.weights_bytes == 0);
  CHECK(both.nvme_bytes == Approx(14.0 * shard));
  CHECK(both.host_bytes == Approx(st.host_bytes + 5 * 1e8 * 2.0));
  // Drives too small: refused with the numbers.
  const auto small =
      llama7b(plan, "pcie-4090", {"topology.node.host.nvme.drives=1", "topology.node.host.nvme.capacity=90GB"});
  const auto over = sim::memory::estimate_memory(small.model, small.plan, small.cluster);
  CHECK(over.nvme_oom);
  CHECK_THAT(test::error_of([&] { sim::scenario::refuse_out_of_memory(small, ""); }),
             Catch::Contains("does not fit on the NVMe drives"));
  // No drives, or not ZeRO-3: one line each.
  CHECK_THAT(test::error_of([&] { llama7b(plan, "workstation-rtx3090"); }), Catch::Contains("has no NVMe drives"));
  auto zero2_nvme = zero2;
  zero2_nvme["offload_optimizer"] = "nvme";
  CHECK_THAT(test::error_of([&] { llama7b(zero2_nvme); }), Catch::Contains("which runs with ZeRO-3"));

  // The step: per GPU, sub-groups of 1e8 parameters each swapped in (12 bytes), updated, swapped out, every swap
  // striped over both drives; nothing of the state is copied to the GPU but the updated parameters.
  const nlohmann::json tiny = {
      {"schema", "model/v1"},      {"name", "tiny"},      {"num_layers", 4},   {"hidden_size", 1024},
      {"num_attention_heads", 16}, {"vocab_size", 32000}, {"seq_length", 1024}};
  nlohmann::json step{{"dp", 8},
                      {"global_batch", 8},
                      {"zero_stage", 3},
                      {"zero3_per_tensor", false},
                      {"offload_optimizer", "nvme"},
                      {"nvme_sub_group", 2000000}};
  const auto b = test::build(step, tiny, "pcie-4090", false);
  const double params =
      sim::memory::estimate_memory(b.scenario.model, b.scenario.plan, b.scenario.cluster).per_stage.front().params;
  const auto& nvme = b.scenario.cluster.node.host.nvme;
  double read = 0;
  double written = 0;
  int updates = 0;
  for (sim::workload::TaskId t = 0; t < b.tasks.size(); ++t) {
    const auto& task = b.tasks[t];
    if (task.rank != 0)
      continue;
    if (task.kind == TaskKind::HOST_COPY && sim::workload::is_nvme(task.peer))
      (sim::workload::nvme_reads(task.peer) ? read : written) += task.bytes;
    if (task.kind == TaskKind::HOST_COMPUTE)
      ++updates;
  }
  const double shard_params = params / 8;
  CHECK(updates == static_cast<int>(std::ceil(shard_params / 2e6)));
  CHECK(read == Approx(12.0 * shard_params)); // drives' links rated at the read rate
  CHECK(written == Approx(12.0 * shard_params * nvme.read_bandwidth / nvme.write_bandwidth));
}

TEST_CASE("activation offloading: each layer's activations out after its forward pass and back before its backward "
          "pass, two layers' worth left in HBM")
{
  const nlohmann::json tiny = {
      {"schema", "model/v1"},      {"name", "tiny"},      {"num_layers", 4},   {"hidden_size", 1024},
      {"num_attention_heads", 16}, {"vocab_size", 32000}, {"seq_length", 1024}};
  nlohmann::json plan{{"dp", 1}, {"micro_batch", 2}, {"global_batch", 4}, {"recompute", "none"}};
  const auto kept = test::build(plan, tiny, "pcie-4090", false);
  plan["offload_activations"] = true;
  const auto b = test::build(plan, tiny, "pcie-4090", false);
  const auto& s = b.scenario;
  const double layer = sim::memory::layer_activation_bytes(s.model, s.plan, 0);
  const auto all = sim::memory::estimate_memory(s.model, kept.scenario.plan, s.cluster).per_stage.front();
  const auto offloaded = sim::memory::estimate_memory(s.model, s.plan, s.cluster).per_stage.front();
  CHECK(all.layer_activations_bytes == Approx(4 * layer)); // four layers, one micro-batch in flight
  CHECK(offloaded.layer_activations_bytes == Approx(2 * layer));
  CHECK(offloaded.host_bytes == Approx(2 * layer));
  // Per micro-batch and layer one copy each way of the layer's activations (on the wire at the pinned rate).
  int out = 0;
  int back = 0;
  for (sim::workload::TaskId t = 0; t < b.tasks.size(); ++t) {
    const auto& task = b.tasks[t];
    if (task.kind != TaskKind::HOST_COPY)
      continue;
    CHECK(task.bytes == Approx(layer / sim::workload::pinned_copy_efficiency));
    ++(task.peer == sim::workload::copy_to_host ? out : back);
  }
  CHECK(out == 2 * 4);
  CHECK(back == 2 * 4);
  CHECK_FALSE(b.tasks.folded);
  // A topology without its hosts has nowhere to put them.
  CHECK_THAT(test::error_of([&] { test::build(plan, tiny, "hgx-a800", false); }),
             Catch::Contains("where activations are offloaded"));
}
