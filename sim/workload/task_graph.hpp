// The work of one training step as data: compute tasks on GPUs, point-to-point transfers, and zero-cost sync
// points that join them, with their dependencies. Collectives are already lowered into transfers; the engine
// sees nothing else.
#pragma once

#include "core/big_vector.hpp"
#include "core/json_reader.hpp"

#include <array>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace sim::workload {

using TaskId = std::uint32_t;
inline constexpr TaskId no_task = std::numeric_limits<TaskId>::max();

// HOST_COPY: a copy between a GPU (`rank`) and the memory of its CPU socket, by the GPU's copy engine (no SMs), the
// way `peer` says (copy_to_host, copy_from_host), or between that memory and an NVMe drive of its node by the drive
// (nvme_write(d), nvme_read(d)); HOST_COMPUTE: work on the CPU of `rank`'s process (CPU Adam), `duration_s` long,
// beside whatever its GPU does.
enum class TaskKind : std::uint8_t { COMPUTE, TRANSFER, SYNC, HOST_COPY, HOST_COMPUTE };
inline constexpr std::int32_t copy_to_host = 0;
inline constexpr std::int32_t copy_from_host = 1;
constexpr std::int32_t nvme_write(int drive)
{
  return 2 + 2 * drive;
}
constexpr std::int32_t nvme_read(int drive)
{
  return 3 + 2 * drive;
}
constexpr bool is_nvme(std::int32_t peer)
{
  return peer >= 2;
}
constexpr int nvme_drive(std::int32_t peer)
{
  return (peer - 2) / 2;
}
constexpr bool nvme_reads(std::int32_t peer)
{
  return peer >= 2 && peer % 2 == 1;
}

// What a task is for: the forward, backward and recomputed passes and the optimizer on the compute stream;
// tensor-, pipeline-, data-, expert- and context-parallel communication; the weight gradients a zero-bubble backward
// pass left for later (DualPipe); copies to and from host memory (offload).
enum class Category : std::uint8_t { FORWARD, BACKWARD, RECOMPUTE, OPTIMIZER, TP, PP, DP, EP, CP, WEIGHT, OFFLOAD };

// The collectives lowered into transfers (workload/collectives).
enum class CollectiveKind : std::uint8_t { ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL };

inline constexpr std::array<core::Choice<TaskKind>, 5> task_kind_choices{{{"compute", TaskKind::COMPUTE},
                                                                          {"transfer", TaskKind::TRANSFER},
                                                                          {"sync", TaskKind::SYNC},
                                                                          {"host_copy", TaskKind::HOST_COPY},
                                                                          {"host_compute", TaskKind::HOST_COMPUTE}}};
inline constexpr std::array<core::Choice<Category>, 11> category_choices{{{"forward", Category::FORWARD},
                                                                          {"backward", Category::BACKWARD},
                                                                          {"recompute", Category::RECOMPUTE},
                                                                          {"optimizer", Category::OPTIMIZER},
                                                                          {"tp", Category::TP},
                                                                          {"pp", Category::PP},
                                                                          {"dp", Category::DP},
                                                                          {"ep", Category::EP},
                                                                          {"cp", Category::CP},
                                                                          {"weight_gradient", Category::WEIGHT},
                                                                          {"offload", Category::OFFLOAD}}};
inline constexpr std::array<core::Choice<CollectiveKind>, 4> collective_kind_choices{
    {{"all_reduce", CollectiveKind::ALL_REDUCE},
     {"reduce_scatter", CollectiveKind::REDUCE_SCATTER},
     {"all_gather", CollectiveKind::ALL_GATHER},
     {"all_to_all", CollectiveKind::ALL_TO_ALL}}};

struct Task { // NOLINT(cppcoreguidelines-pro-type-member-init): each union's first member is set
  TaskKind kind = TaskKind::SYNC;
  Category category = Category::FORWARD;
  std::int16_t stage = -1;
  std::int16_t chunk = -1;
  std::uint16_t memory_share = 0; // compute: the share of its time its kernels stream memory, in 1/65535
  std::int32_t rank = -1;         // compute: the GPU; transfer: the sender
  union {
    std::int32_t peer = -1;  // transfer: the receiver
    std::int32_t host_waits; // compute: 1 when the host waits for the GPU's work so far before launching it
  };
  std::int32_t microbatch = -1;
  std::int32_t layer = -1;
  std::uint32_t label = 0;            // into TaskGraph::labels
  std::uint32_t collective = no_task; // the collective a transfer or sync belongs to
  double duration_s = 0;              // compute
  double flops = 0;                   // compute, as executed
  double bytes = 0;                   // transfer, on the wire
  union {
    double latency_s = 0; // transfer: waited before the flow starts
    double host_s;        // compute: the host's time to launch its kernels
  };
};

struct CollectiveInfo {
  std::uint32_t label = 0;
  Category category = Category::TP;
  CollectiveKind kind = CollectiveKind::ALL_REDUCE;
  std::uint32_t ranks = 0;
  double bytes = 0; // the whole buffer (payload; flows may carry protocol overhead on top)
};

// workload/graph_size's memory estimate (and the messages that quote it) count on these sizes.
static_assert(sizeof(Task) == 64, "a Task is 64 bytes");
static_assert(sizeof(CollectiveInfo) == 24, "a CollectiveInfo is 24 bytes");

class TaskGraph {
 public:
  // Room for about this many tasks and dependencies, so that the graph grows without being copied (pages not
  // written to stay unallocated, so an estimate on the high side costs nothing).
  void reserve(std::size_t tasks, std::size_t dependencies);
  TaskId add(const Task& task);
  void depend(TaskId task, TaskId on) { edges_.emplace_back(on, task); }
  std::uint32_t label(const std::string& text);
  std::uint32_t add_collective(CollectiveInfo info);

  // Sorts the dependencies into per-task lists; call once, after the last add / depend.
  void finalize();

  std::size_t size() const { return tasks_.size(); }
  const Task& operator[](TaskId id) const { return tasks_[id]; }
  const core::BigVector<Task>& tasks() const { return tasks_; }
  std::span<const TaskId> dependencies(TaskId id) const;
  std::span<const TaskId> successors(TaskId id) const;
  const std::string& label_text(std::uint32_t id) const { return labels_[id]; }
  const core::BigVector<CollectiveInfo>& collectives() const { return collectives_; }
  std::size_t dependency_count() const { return edges_.size() + dep_ids_.size(); }

  int gpus = 0;
  TaskId step_end = no_task;      // depends on everything
  bool concurrent_passes = false; // some GPU runs two passes side by side (compute tasks of both may be ready at once)

  // Folded graphs (workload/fold) simulate one GPU of each class of interchangeable GPUs, standing for the
  // `multiplicity` GPUs of its class. A folded transfer's peer is an endpoint (cluster_gpus + its index in
  // `endpoints`): the flow from `sender` to `target` as its class of flows crosses the cluster, received by the GPU
  // simulated for `target`'s class. `link_class` and `link_weight` are the fold's classes of link directions.
  struct Endpoint {
    std::int32_t sender = 0;
    std::int32_t target = 0;
    std::int32_t receiver = 0;
  };
  bool folded = false;
  int multiplicity = 1;
  std::vector<int> simulated;     // the GPUs that have tasks
  int cluster_gpus = 0;           // GPUs in the cluster graph (peers above it are endpoints)
  std::vector<int> stage_leaders; // per pipeline stage, its first GPU (tp 0, dp 0): measured in detail
  std::vector<Endpoint> endpoints;
  std::vector<std::uint32_t> link_class;  // per link direction (topology::directed); empty unless folded
  std::vector<std::uint32_t> link_weight; // 0: not simulated
  // Per endpoint, the link directions not simulated (between a non-blocking network's switches) that its class of
  // flows crosses, each with how many of them cross it (workload::unsimulated_crossings); empty where none are.
  std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>> unsimulated;
  // The GPU at the receiving end of a transfer's peer.
  int gpu_of(int peer) const
  {
    return peer < cluster_gpus ? peer : endpoints[static_cast<std::size_t>(peer - cluster_gpus)].receiver;
  }

 private:
  core::BigVector<Task> tasks_;
  core::BigVector<std::pair<TaskId, TaskId>> edges_; // (from, to) until finalize
  core::BigVector<std::uint32_t> dep_offsets_, succ_offsets_;
  core::BigVector<TaskId> dep_ids_, succ_ids_;
  std::vector<std::string> labels_;
  std::unordered_map<std::string, std::uint32_t> label_index_;
  core::BigVector<CollectiveInfo> collectives_;
};

} // namespace sim::workload
