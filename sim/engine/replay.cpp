#include "engine/replay.hpp"

#include "core/heap.hpp"
#include "engine/events.hpp"
#include "engine/platform.hpp"
#include "topology/symmetry.hpp"
#include "workload/fold.hpp"

#include <algorithm>
#include <array>
#include <deque>
#include <fmt/format.h>
#include <limits>
#include <map>
#include <set>
#include <simgrid/kernel/Timer.hpp>
#include <unordered_map>
#include <xbt/log.h>

namespace sim::engine {
namespace sg4 = simgrid::s4u;
using workload::TaskId;
using workload::TaskKind;

namespace {

// What slows a GPU's compute while its own collectives run: the SMs NCCL holds (compute_share_during_comm) for the
// arithmetic, and for the part of a kernel's time that streams memory, the HBM bandwidth NCCL takes: it moves
// nccl_memory_traffic bytes through HBM per byte on its busiest link direction (capped at the GPU's port).
struct GpuLoad {
  int transfers = 0; // in flight with this GPU as an end
  double out = 0;    // their uncontended rates, sent and received
  double in = 0;
  double memory_share = 0; // of the compute task running now
  double port = 0;         // the GPU's fastest link: no more than this leaves or enters it
  // One compute stream: a compute task ready while another runs waits for it, in the order they became ready (those
  // ready at the same instant in the order they were built, where passes run side by side).
  bool computing = false;
  std::deque<TaskId> stream;
  // The compute task running: its work left (seconds at full speed) as of `since`, the speed it runs at, and whether
  // its end at that speed is due (the GPU's keyed event, moved whenever the speed changes).
  TaskId running = workload::no_task;
  double work_left = 0;
  double since = 0;
  double speed = 1;
  bool due = false;
  std::vector<TaskId> arriving; // ready at this instant, not yet queued
  bool dispatching = false;     // a dispatch is due at this instant
  // The host that launches the GPU's kernels: when it has launched the compute tasks started so far, and when the
  // last of them ended (what a host that waits for the GPU waits for).
  double host = 0;
  double last_end = 0;
};

double slowdown(const GpuLoad& l, const topology::ClusterGraph& cg, int gpu)
{
  if (l.transfers == 0)
    return 1.0;
  const auto& rates = cg.rates[cg.kind[static_cast<std::size_t>(gpu)]];
  const double bandwidth = rates.memory_bandwidth;
  const double taken = cg.nccl_memory_traffic * std::min(std::max(l.out, l.in), l.port);
  const double memory = bandwidth > 0 ? bandwidth / std::max(bandwidth - taken, 0.1 * bandwidth) : 1.0;
  return (1.0 - l.memory_share) / rates.compute_share_during_comm + l.memory_share * memory;
}

class Replayer {
 public:
  Replayer(const workload::TaskGraph& g, const topology::ClusterGraph& cluster, const ProgressFn& progress,
           const ReplayOptions& options)
      : g_(g), cluster_(cluster), copies_(folded_copies()), crossings_(folded_crossings()),
        platform_(g.folded ? build_folded_platform(cluster, g.simulated, folded_routes(), metered())
                           : build_platform(cluster)),
        progress_(progress), lone_flows_(options.lone_flows)
  {
    const std::size_t n = g.size();
    pending_.resize(n);
    timeline_.tasks.resize(n);
    load_.assign(cluster.gpu.size(), GpuLoad{});
    for (int gpu = 0; gpu < cluster.gpus(); ++gpu) {
      const auto v = cluster.gpu[static_cast<std::size_t>(gpu)];
      auto& port = load_[static_cast<std::size_t>(gpu)].port;
      for (auto [e, end] = boost::out_edges(v, cluster.graph); e != end; ++e)
        port = std::max(port, cluster.graph[*e].bandwidth * cluster.graph[*e].efficiency);
    }
    if (!g.folded && !cluster.blocking) // (folded, those links are not simulated)
      for (auto [e, end] = boost::edges(cluster.graph); e != end; ++e) {
        const auto& l = cluster.graph[*e];
        if (const auto* link = platform_.link[l.id];
            link != nullptr && cluster.graph[l.from].node < 0 && cluster.graph[l.to].node < 0)
          for (const auto* direction : {link->get_link_up(), link->get_link_down()})
            never_limits_.insert(direction);
      }
    link_bytes_.assign(2 * boost::num_edges(cluster.graph), 0);
    for (TaskId t = 0; t < n; ++t) {
      pending_[t] = static_cast<std::uint32_t>(g.dependencies(t).size());
      if (pending_[t] == 0)
        ready_.push_back(t);
    }
  }

  Timeline run()
  {
    track_links();
    // The replay's clock moves on when SimGrid's passes it (SimGrid's may be catching up with it after the replay ran
    // ahead, or advance by nothing between the events of one instant: the state then lasts no time).
    sg4::Engine::on_time_advance_cb([this](double /*delta*/) {
      if (sg4::Engine::get_clock() > now_)
        note_usage();
    });
    sg4::Activity::on_completion_cb([this](const sg4::Activity& a) {
      const auto flow = in_flight_.find(&a);
      if (flow == in_flight_.end())
        return;
      released_.clear(); // flows that completed before this one: safe to drop now
      const TaskId t = flow->second.first;
      for (std::uint32_t i : route_of(g_[t]).tracked)
        --shared_[i];
      released_.push_back(std::move(flow->second.second));
      in_flight_.erase(flow);
      now_ = sg4::Engine::get_clock();
      finish(t);
      drain();
      arm();
    });
    drain();
    run_events();
    sg4::Engine::get_instance()->run();
    check_complete();
    timeline_.step_time_s = timeline_.tasks[g_.step_end].end_s;
    std::vector<std::shared_ptr<const LinkUsage::Changes>> series;
    for (auto& u : usage_)
      series.push_back(std::make_shared<const LinkUsage::Changes>(std::move(u.changes)));
    const auto nothing = std::make_shared<const LinkUsage::Changes>(LinkUsage::Changes{{0.0, 0.0}});
    for (const auto& [id, forward, i] : reported_)
      timeline_.usage.push_back(i == idle ? LinkUsage{id, forward, 0.0, nothing}
                                          : LinkUsage{id, forward, usage_[i].peak, series[i]});
    for (std::size_t id = 0; 2 * id < link_bytes_.size(); ++id) {
      timeline_.link_bytes_forward.push_back(static_cast<double>(link_bytes_[topology::directed(id, true)]));
      timeline_.link_bytes_backward.push_back(static_cast<double>(link_bytes_[topology::directed(id, false)]));
    }
    if (g_.folded)
      spread_link_bytes();
    return std::move(timeline_);
  }

 private:
  // A transfer's route, computed once per pair of GPUs (folded: per endpoint): the graph links with their direction
  // (folded: the classes' links, each as many times as its weight), and the indices (into tracked_) of the tracked
  // links on its SimGrid route.
  struct Route {
    std::vector<std::tuple<std::size_t, bool, double>> graph; // link, direction, flows it stands for there
    std::vector<std::uint32_t> tracked;
    // Its SimGrid links that may limit it (not a meter, nor a link between a non-blocking network's switches), as
    // indices into link_flows_, with how often it crosses each; and its rate alone there, the least of their
    // bandwidths, where it crosses each once (0 where it crosses one more often: folded, a class of flows sharing a
    // link, which its unfolded counterparts do in SimGrid).
    std::vector<std::pair<std::uint32_t, std::uint32_t>> links;
    double alone_rate = 0;
    double rate = 0;           // its slowest link's achievable bandwidth: the flow's rate when alone
    int meter = -1;            // folded: its endpoint, where its class crosses links that are not simulated
    sg4::Host* from = nullptr; // the hosts its flow goes between
    sg4::Host* to = nullptr;
  };

  // A tracked link's usage: its peak and every change (time, bytes/s from then on).
  struct Usage {
    double peak = 0;
    LinkUsage::Changes changes{{0.0, 0.0}};
  };

  // A flow alone on its links, timed by the replay (ReplayOptions::lone_flows).
  struct Lone {
    double rate = 0;
    double since = 0; // when `bytes` were left
    double bytes = 0;
  };

  // The rates of the links that carry a flow from the last change (the replay's clock) on, once time is about to
  // advance past it (the other links carry nothing: their usage went to 0 when their last flow ended). Rates change
  // only when a flow starts or ends: until then each link keeps the usage last recorded.
  void note_usage()
  {
    if (!flows_changed_)
      return;
    flows_changed_ = false;
    // A link not simulated carries, per endpoint whose class crosses it, as many flows at the meter's rate (and the
    // rates of its lone flows, which SimGrid does not see).
    for (std::uint32_t e : metering_)
      if (const double rate = platform_.meter[e]->get_usage() + lone_meter_usage_[e]; rate > 0)
        for (const auto& [d, flows] : g_.unsimulated[e])
          unsimulated_usage_[unsimulated_index_.at(d)] += flows * rate;
    const auto note = [this](std::uint32_t i) {
      const double usage = tracked_[i] == nullptr ? std::exchange(unsimulated_usage_[i], 0.0)
                           : shared_[i] > 0       ? tracked_[i]->get_usage() + lone_usage_[i]
                                                  : lone_usage_[i]; // (SimGrid's usage of a link it has no flow on: 0)
      usage_[i].peak = std::max(usage_[i].peak, usage);
      record(usage_[i], now_, usage);
    };
    // With flows in SimGrid (a change may move the rates of flows on other links) or on links not simulated (their
    // meters' rates), every busy link; else only the lone flows' links have a usage, which moved only where a flow
    // started, ended or joined SimGrid since the last change: those touched.
    if (!in_flight_.empty() || unsimulated_busy_ > 0) {
      for (std::uint32_t i : busy_)
        note(i);
    } else {
      for (std::uint32_t i : touched_)
        if (flows_[i] > 0)
          note(i);
    }
    for (std::uint32_t i : touched_)
      touched_at_[i] = 0;
    touched_.clear();
  }

  // The tracked links of a flow that starts, ends, or goes into SimGrid: their usage is noted when time advances.
  void touch(const Route& route)
  {
    for (std::uint32_t i : route.tracked)
      if (touched_at_[i] == 0) {
        touched_at_[i] = 1;
        touched_.push_back(i);
      }
  }

  void schedule(double time, EventKind kind, std::uint32_t id) { events_.schedule(time, kind, id); }

  // Runs the events due at SimGrid's clock and, while no flow is in SimGrid, those after it: nothing can happen there
  // meanwhile. Up to one that launches a flow into SimGrid (at its own time: SimGrid's clock must reach it first);
  // then arms SimGrid for the next.
  void run_events()
  {
    const double clock = sg4::Engine::get_clock();
    while (!events_.empty()) {
      const ReplayEvent& next = events_.next();
      if (next.time > clock && (!in_flight_.empty() || (next.kind == EventKind::LAUNCH && !launches_alone(next.id))))
        break;
      const ReplayEvent e = events_.pop();
      if (e.time > now_) {
        note_usage();
        now_ = e.time;
      }
      handle(e);
      drain();
    }
    arm();
  }

  // A SimGrid timer at the next event's time (one is enough: it runs every event due then, and arms the next).
  void arm()
  {
    if (events_.empty())
      return;
    const double next = events_.next().time;
    if (armed_ != nullptr) {
      if (armed_at_ <= next)
        return;
      armed_->remove();
    }
    armed_at_ = next;
    armed_ = simgrid::kernel::timer::Timer::set(next, [this]() {
      armed_ = nullptr;
      run_events();
    });
  }

  void handle(const ReplayEvent& e)
  {
    switch (e.kind) {
      case EventKind::COMPUTE_END: {
        auto& l = load_[e.id];
        l.due = false;
        const TaskId t = l.running;
        l.running = workload::no_task;
        finish(t);
        return;
      }
      case EventKind::LAUNCH:
        launch_transfer(e.id);
        return;
      case EventKind::LONE_END:
        if (!lone(e.id))
          return; // it went into SimGrid
        leave_alone(g_[e.id]);
        finish(e.id);
        return;
      case EventKind::FINISH:
        finish(e.id);
        return;
      case EventKind::DISPATCH:
        dispatch(static_cast<int>(e.id));
        return;
    }
  }

  // Whether a transfer launched now would run alone (or not be a flow at all): nothing for SimGrid to do.
  bool launches_alone(TaskId t)
  {
    const workload::Task& task = g_[t];
    return task.bytes <= 0 || alone_on(route_of(task));
  }

  // Whether a flow starting now on this route would have each link that may limit it to itself.
  bool alone_on(const Route& route) const
  {
    return lone_flows_ && route.alone_rate > 0 &&
           std::all_of(route.links.begin(), route.links.end(),
                       [this](const auto& l) { return link_flows_[l.first] == 0; });
  }

  void drain()
  {
    const double now = now_;
    while (!ready_.empty()) {
      const TaskId t = ready_.front();
      ready_.pop_front();
      const workload::Task& task = g_[t];
      timeline_.tasks[t].start_s = now;
      switch (task.kind) {
        case TaskKind::SYNC:
          finish(t);
          break;
        case TaskKind::COMPUTE:
          if (task.duration_s <= 0) {
            finish(t);
          } else if (g_.concurrent_passes) {
            load_[static_cast<std::size_t>(task.rank)].arriving.push_back(t);
            dispatch_later(task.rank);
          } else if (load_[static_cast<std::size_t>(task.rank)].computing)
            load_[static_cast<std::size_t>(task.rank)].stream.push_back(t);
          else
            launch_compute(t, task);
          break;
        case TaskKind::TRANSFER:
        case TaskKind::HOST_COPY:
          schedule(now + task.latency_s, EventKind::LAUNCH, t);
          break;
        case TaskKind::HOST_COMPUTE: // on the host's CPU, beside its GPU's stream
          schedule(now + std::max(task.duration_s, 0.0), EventKind::FINISH, t);
          break;
      }
    }
  }

  // With passes side by side, a GPU's compute tasks that become ready at the same instant (in whatever order SimGrid
  // completes what they waited for) queue in the order they were built: decided once the instant's events are done,
  // so that a folded graph runs exactly as the unfolded one.
  void dispatch_later(int gpu)
  {
    auto& load = load_[static_cast<std::size_t>(gpu)];
    if (load.dispatching)
      return;
    load.dispatching = true;
    schedule(now_, EventKind::DISPATCH, static_cast<std::uint32_t>(gpu));
  }

  void dispatch(int gpu)
  {
    auto& l = load_[static_cast<std::size_t>(gpu)];
    l.dispatching = false;
    std::sort(l.arriving.begin(), l.arriving.end());
    l.stream.insert(l.stream.end(), l.arriving.begin(), l.arriving.end());
    l.arriving.clear();
    if (!l.computing && !l.stream.empty()) {
      const TaskId next = l.stream.front();
      l.stream.pop_front();
      launch_compute(next, g_[next]);
    }
  }

  // A compute task runs on its GPU's stream at the GPU's speed, which changes as its own transfers start and end: kept
  // here (work left, speed, an event for the end) rather than as a SimGrid execution, which costs far more per task.
  void launch_compute(TaskId t, const workload::Task& task)
  {
    auto& load = load_[static_cast<std::size_t>(task.rank)];
    const double now = now_;
    load.computing = true;
    load.memory_share = task.memory_share / 65535.0;
    load.running = t;
    load.work_left = task.duration_s;
    update_speed(task.rank);
    const double wait = host_wait(load, task, now);
    load.since = now + wait;
    timeline_.tasks[t].start_s = now + wait;
    if (wait > 0)
      timeline_.host_waits.emplace_back(t, wait);
    schedule_end(task.rank);
  }

  // The host launches a GPU's compute tasks one after another, as fast as it can, in the order the GPU runs them
  // (with `host_waits`, once the GPU's work so far has ended): a task's kernels start no earlier than the host began
  // launching them and end no earlier than it finished. How long the GPU, free and the task ready, waits for that.
  static double host_wait(GpuLoad& load, const workload::Task& task, double now)
  {
    if (task.host_waits == 1)
      load.host = std::max(load.host, load.last_end);
    const double begin = load.host;
    load.host += task.host_s;
    return std::max({0.0, begin - now, load.host - now - task.duration_s / load.speed});
  }

  void schedule_end(int gpu)
  {
    auto& load = load_[static_cast<std::size_t>(gpu)];
    load.due = true;
    events_.move(load.since + load.work_left / load.speed, EventKind::COMPUTE_END, static_cast<std::uint32_t>(gpu));
  }

  // The GPU's speed for its current compute and collectives (quantised to 1/speed_levels); a running compute task
  // keeps the work it did at the old speed and goes on at the new one.
  void update_speed(int gpu)
  {
    auto& load = load_[static_cast<std::size_t>(gpu)];
    const double speed = 1.0 / slowdown(load, cluster_, gpu);
    const int level = std::clamp(static_cast<int>(std::lround(speed * speed_levels)), 1, speed_levels);
    const double quantised = static_cast<double>(level) / speed_levels;
    if (quantised == load.speed)
      return;
    if (load.running != workload::no_task && load.due) {
      const double now = now_;
      load.work_left = std::max(load.work_left - std::max(now - load.since, 0.0) * load.speed, 0.0);
      load.since = std::max(now, load.since); // (a task waiting for its host has done nothing yet)
      load.speed = quantised;
      schedule_end(gpu);
    } else {
      load.speed = quantised;
    }
  }

  // A transfer starts (+1) or ends (-1) at its GPUs.
  void account(const workload::Task& task, double rate, int sign)
  {
    const auto [sender, receiver] = ends(task);
    // Folded, a flow received by its own sender's GPU is that GPU's flow and the same flow from its class's peer to it.
    const bool loop = receiver == sender;
    for (int gpu : {sender, loop ? -1 : receiver}) {
      if (gpu < 0)
        continue;
      auto& load = load_[static_cast<std::size_t>(gpu)];
      load.transfers += sign;
      (gpu == sender ? load.out : load.in) += sign * rate;
      if (loop)
        load.in += sign * rate;
      if (load.transfers == 0)
        load.out = load.in = 0; // no rounding residue
      update_speed(gpu);
    }
  }

  void launch_transfer(TaskId t)
  {
    const workload::Task& task = g_[t];
    if (task.bytes <= 0) {
      finish(t);
      return;
    }
    const Route& route = route_of(task);
    const auto bytes = static_cast<double>(static_cast<std::uint64_t>(task.bytes)); // SimGrid counts whole bytes
    const bool alone = alone_on(route);
    if (!alone) // the lone flows on its links now share them: into SimGrid with what they have left
      for (const auto& [l, times] : route.links)
        if (const TaskId other = link_lone_[l]; other != workload::no_task)
          share(other);
    for (const auto& [l, times] : route.links)
      ++link_flows_[l];
    if (alone)
      start_alone(t, route, bytes);
    else
      start_shared(t, route, bytes);
    flows_changed_ = true;
    touch(route);
    for (std::uint32_t i : route.tracked)
      if (flows_[i]++ == 0) {
        busy_at_[i] = static_cast<std::uint32_t>(busy_.size());
        busy_.push_back(i);
        unsimulated_busy_ += tracked_[i] == nullptr ? 1 : 0;
      }
    if (const auto e = route.meter; e >= 0 && metered_flows_[static_cast<std::size_t>(e)]++ == 0)
      metering_.insert(static_cast<std::uint32_t>(e));
    if (task.kind == TaskKind::TRANSFER) // a copy engine's copy takes no SMs
      account(task, route.rate, +1);
  }

  // A flow into SimGrid, sharing its links max-min fairly with the others there.
  void start_shared(TaskId t, const Route& route, double bytes)
  {
    sg4::CommPtr comm = sg4::Comm::sendto_init(route.from, route.to);
    comm->set_payload_size(static_cast<std::uint64_t>(std::llround(bytes)));
    comm->vetoable_start();
    in_flight_.emplace(comm.get(), std::make_pair(t, comm));
    for (std::uint32_t i : route.tracked)
      ++shared_[i];
  }

  // A flow alone on its links: at its bottleneck's bandwidth, what max-min gives it, until it ends or shares a link.
  void start_alone(TaskId t, const Route& route, double bytes)
  {
    const Lone lone{route.alone_rate, now_, bytes};
    schedule(now_ + bytes / route.alone_rate, EventKind::LONE_END, t);
    mark_alone(route, t, lone.rate);
    lone_timing_[route.links.front().first] = lone;
  }

  // Whether a flow is alone on its links now (it is on each, or on none: it shared one and went into SimGrid).
  bool lone(TaskId t)
  {
    const Route& route = route_of(g_[t]);
    return !route.links.empty() && link_lone_[route.links.front().first] == t;
  }

  // A lone flow's links free of it (usage included), once it ends or goes into SimGrid; returns what it was.
  Lone leave_alone(const workload::Task& task)
  {
    const Route& route = route_of(task);
    const Lone lone = lone_timing_[route.links.front().first];
    mark_alone(route, workload::no_task, -lone.rate);
    return lone;
  }

  // Marks a route's links as carrying lone flow `t` (no_task: none), its rate added to their usage.
  void mark_alone(const Route& route, TaskId t, double rate)
  {
    for (const auto& [l, times] : route.links)
      link_lone_[l] = t;
    touch(route);
    for (std::uint32_t i : route.tracked)
      if (tracked_[i] != nullptr) // (a link not simulated: from its meter)
        lone_usage_[i] += rate;
    if (route.meter >= 0)
      lone_meter_usage_[static_cast<std::size_t>(route.meter)] += rate;
  }

  // A lone flow that another flow joins on one of its links goes on in SimGrid with the bytes it has left.
  void share(TaskId t)
  {
    const workload::Task& task = g_[t];
    const Lone lone = leave_alone(task); // (its end, scheduled, is no longer due)
    start_shared(t, route_of(task), std::max(lone.bytes - lone.rate * (now_ - lone.since), 0.0));
  }

  // The GPUs whose NCCL kernels move a transfer's bytes: its sender and its receiver (-1 for none).
  std::array<int, 2> ends(const workload::Task& task) const
  {
    if (g_.folded)
      return {task.rank, g_.gpu_of(task.peer)};
    return {task.rank, task.peer != task.rank ? task.peer : -1};
  }

  // The hosts a transfer's flow goes between (looked up once per route).
  std::pair<sg4::Host*, sg4::Host*> hosts(const workload::Task& task) const
  {
    if (task.kind == TaskKind::HOST_COPY && g_.folded)
      return platform_.endpoint[copies_.at(copy_key(task))];
    if (task.kind == TaskKind::HOST_COPY) {
      auto* gpu = platform_.gpu[static_cast<std::size_t>(task.rank)];
      auto* memory = platform_.host_memory[static_cast<std::size_t>(task.rank)];
      if (workload::is_nvme(task.peer)) {
        auto* drive = platform_.nvme[static_cast<std::size_t>(task.rank)].at(
            static_cast<std::size_t>(workload::nvme_drive(task.peer)));
        return workload::nvme_reads(task.peer) ? std::make_pair(drive, memory) : std::make_pair(memory, drive);
      }
      return task.peer == workload::copy_to_host ? std::make_pair(gpu, memory) : std::make_pair(memory, gpu);
    }
    if (g_.folded)
      return platform_.endpoint[static_cast<std::size_t>(task.peer - g_.cluster_gpus)];
    return {platform_.gpu[static_cast<std::size_t>(task.rank)], platform_.gpu[static_cast<std::size_t>(task.peer)]};
  }

  // A copy's key: its GPU and its way (workload::copy_to_host, nvme_read(d), ...).
  static std::uint64_t copy_key(const workload::Task& task)
  {
    return (static_cast<std::uint64_t>(task.rank) << 32) | static_cast<std::uint32_t>(task.peer);
  }

  // Folded: the copies to and from host memory and the drives, one route per GPU and way (in task order), after the
  // endpoints in the platform's and crossings_' numbering.
  std::map<std::uint64_t, std::size_t> folded_copies() const
  {
    std::map<std::uint64_t, std::size_t> out;
    if (!g_.folded)
      return out;
    for (TaskId t = 0; t < g_.size(); ++t)
      if (g_[t].kind == TaskKind::HOST_COPY)
        out.try_emplace(copy_key(g_[t]), g_.endpoints.size() + out.size());
    return out;
  }

  // The links a copy crosses, in its direction: from the GPU to its socket's memory (or back), or from that memory to
  // a drive (or back).
  std::pair<std::vector<topology::EdgeId>, std::vector<bool>> copy_path(int rank, std::int32_t way) const
  {
    std::vector<topology::EdgeId> path;
    topology::VertexId start = cluster_.gpu[static_cast<std::size_t>(rank)];
    if (workload::is_nvme(way)) {
      path = topology::route_to_nvme(cluster_, rank, workload::nvme_drive(way));
      const auto node = static_cast<std::size_t>(rank / cluster_.gpus_per_node);
      start = cluster_.host_memory[node][static_cast<std::size_t>(
          cluster_.socket_of_gpu[static_cast<std::size_t>(rank % cluster_.gpus_per_node)])];
    } else {
      path = topology::route_to_host_memory(cluster_, rank);
    }
    auto forward = topology::link_directions(cluster_, start, path);
    if (way == workload::copy_from_host || workload::nvme_reads(way))
      forward.flip();
    return {std::move(path), std::move(forward)};
  }

  // Per folded endpoint, what its flows cross.
  std::vector<std::vector<workload::Crossing>> folded_crossings() const
  {
    std::vector<std::vector<workload::Crossing>> out;
    for (const auto& e : g_.endpoints)
      out.push_back(workload::crossings(cluster_, g_.link_class, g_.link_weight, e.sender, e.target));
    out.resize(out.size() + copies_.size());
    for (const auto& [key, index] : copies_) {
      const auto [path, forward] = copy_path(static_cast<int>(key >> 32), static_cast<std::int32_t>(key & 0xffffffffU));
      for (std::size_t k = 0; k < path.size(); ++k) {
        const auto d = topology::directed(cluster_.graph[path[k]].id, forward[k]);
        out[index].push_back(workload::Crossing{d, g_.link_class[d], g_.link_weight[d]});
      }
    }
    return out;
  }
  // Per folded endpoint, its SimGrid route: the class of each link direction its flows cross, as many times as its
  // weight.
  std::vector<std::vector<std::uint32_t>> folded_routes() const
  {
    std::vector<std::vector<std::uint32_t>> out;
    for (const auto& route : crossings_) {
      out.emplace_back();
      for (const auto& c : route)
        out.back().insert(out.back().end(), c.weight, c.cls);
    }
    return out;
  }

  // Per folded endpoint, whether its class of flows crosses links that are not simulated: then a meter tells its rate.
  std::vector<bool> metered() const
  {
    std::vector<bool> out(g_.endpoints.size() + copies_.size(), false); // a copy never leaves its node
    for (std::size_t e = 0; e < g_.unsimulated.size(); ++e)
      out[e] = !g_.unsimulated[e].empty();
    return out;
  }

  void finish(TaskId t)
  {
    const workload::Task& task = g_[t];
    timeline_.tasks[t].end_s = now_;
    if ((task.kind == TaskKind::TRANSFER || task.kind == TaskKind::HOST_COPY) && task.bytes > 0) {
      flows_changed_ = true;
      const Route& route = route_of(task);
      for (const auto& [l, times] : route.links)
        --link_flows_[l];
      for (const auto& [id, forward, times] : route.graph)
        link_bytes_[topology::directed(id, forward)] +=
            static_cast<std::uint64_t>(task.bytes) * static_cast<std::uint64_t>(times);
      touch(route);
      for (std::uint32_t i : route.tracked)
        if (--flows_[i] == 0) {
          unsimulated_busy_ -= tracked_[i] == nullptr ? 1 : 0;
          lone_usage_[i] = 0; // no rounding residue
          const std::uint32_t last = busy_.back();
          busy_[busy_at_[i]] = last;
          busy_at_[last] = busy_at_[i];
          busy_.pop_back();
          record(usage_[i], timeline_.tasks[t].end_s, 0.0);
        }
      if (route.meter >= 0 && --metered_flows_[static_cast<std::size_t>(route.meter)] == 0) {
        metering_.erase(static_cast<std::uint32_t>(route.meter));
        lone_meter_usage_[static_cast<std::size_t>(route.meter)] = 0; // no rounding residue
      }
      if (task.kind == TaskKind::TRANSFER)
        account(task, route.rate, -1);
    }
    if (task.kind == TaskKind::COMPUTE && task.duration_s > 0) { // the GPU's stream takes its next waiting task
      auto& load = load_[static_cast<std::size_t>(task.rank)];
      load.computing = false;
      load.last_end = timeline_.tasks[t].end_s;
      if (g_.concurrent_passes)
        dispatch_later(task.rank);
      else if (!load.stream.empty()) {
        const TaskId next = load.stream.front();
        load.stream.pop_front();
        launch_compute(next, g_[next]);
      }
    }
    if (++finished_ % 65536 == 0 && progress_)
      progress_({finished_, g_.size(), timeline_.tasks[t].end_s});
    for (TaskId s : g_.successors(t))
      if (--pending_[s] == 0)
        ready_.push_back(s);
  }

  const Route& route_of(const workload::Task& task)
  {
    // (A copy to or from host memory keys on its direction, above every GPU's index.)
    const bool copy = task.kind == TaskKind::HOST_COPY;
    const std::uint32_t other = copy ? no_peer - 1 - static_cast<std::uint32_t>(task.peer) : task.peer;
    const std::uint64_t key = (static_cast<std::uint64_t>(task.rank) << 32) | other;
    // A flow's route is looked up when it launches, ends or changes, so most lookups find it in a small cache in front
    // of the map (whose routes stay where they are).
    auto& cached = route_cache_[(key * 0x9E3779B97F4A7C15ULL) >> (64 - route_cache_bits)];
    if (cached.second != nullptr && cached.first == key)
      return *cached.second;
    if (auto it = routes_.find(key); it != routes_.end()) {
      cached = {key, &it->second};
      return it->second;
    }
    Route r;
    std::vector<topology::EdgeId> path;
    std::vector<bool> forward;
    if (copy) {
      std::tie(path, forward) = copy_path(task.rank, task.peer);
    } else {
      const int target =
          g_.folded ? g_.endpoints[static_cast<std::size_t>(task.peer - g_.cluster_gpus)].target : task.peer;
      path = topology::route(cluster_, task.rank, target);
      forward = topology::link_directions(cluster_, cluster_.gpu[static_cast<std::size_t>(task.rank)], path);
    }
    r.rate = path.empty() ? 0.0 : std::numeric_limits<double>::infinity();
    for (std::size_t k = 0; k < path.size(); ++k) {
      const auto& link = cluster_.graph[path[k]];
      r.rate = std::min(r.rate, link.bandwidth * link.efficiency);
      if (!g_.folded)
        r.graph.emplace_back(link.id, forward[k], 1.0);
    }
    if (g_.folded) {
      const auto e = copy ? copies_.at(copy_key(task)) : static_cast<std::size_t>(task.peer - g_.cluster_gpus);
      for (const auto& c : crossings_[e])
        if (c.weight > 0)
          r.graph.emplace_back(c.cls / 2, c.cls % 2 == 0, c.weight);
      // The links not simulated: as many of the class's flows as cross each (the meter gives their rate).
      if (e < g_.unsimulated.size() && !g_.unsimulated[e].empty()) {
        r.meter = static_cast<int>(e);
        for (const auto& [d, flows] : g_.unsimulated[e]) {
          r.graph.emplace_back(d / 2, d % 2 == 0, flows);
          r.tracked.push_back(unsimulated_index_.at(d));
        }
      }
    }
    std::vector<sg4::Link*> links;
    std::tie(r.from, r.to) = hosts(task);
    r.from->route_to(r.to, links, nullptr);
    const sg4::Link* meter = r.meter >= 0 ? platform_.meter[static_cast<std::size_t>(r.meter)] : nullptr;
    std::map<std::uint32_t, std::uint32_t> crossed; // shared link -> times its route crosses it
    for (const auto* link : links) {
      if (const auto found = tracked_index_.find(link); found != tracked_index_.end())
        r.tracked.push_back(found->second);
      if (link == meter || never_limits_.count(link) > 0)
        continue;
      const auto [at, added] = link_index_.try_emplace(link, static_cast<std::uint32_t>(link_flows_.size()));
      if (added) {
        link_flows_.push_back(0);
        link_lone_.push_back(workload::no_task);
        lone_timing_.emplace_back();
        link_bandwidth_.push_back(link->get_bandwidth());
      }
      ++crossed[at->second];
    }
    r.alone_rate = crossed.empty() ? 0.0 : std::numeric_limits<double>::infinity();
    for (const auto& [l, times] : crossed) {
      r.links.emplace_back(l, times);
      r.alone_rate = times == 1 ? std::min(r.alone_rate, link_bandwidth_[l]) : 0.0;
    }
    return routes_.emplace(key, std::move(r)).first->second;
  }

  // A link's usage from `time` on; a second change at the same time replaces the first.
  static void record(Usage& u, double time, double usage)
  {
    if (u.changes.back().first == time) {
      u.changes.back().second = usage;
      if (u.changes.size() >= 2 && u.changes[u.changes.size() - 2].second == usage)
        u.changes.pop_back();
    } else if (u.changes.back().second != usage) {
      u.changes.emplace_back(time, usage);
    }
  }

  void track_links()
  {
    std::set<std::size_t> ids;
    const auto& graph = cluster_.graph;
    for (int gpu : g_.stage_leaders) {
      for (auto e : topology::route_to_network(cluster_, gpu))
        ids.insert(graph[e].id);
      for (auto [e, end] = boost::out_edges(cluster_.gpu[static_cast<std::size_t>(gpu)], graph); e != end; ++e)
        ids.insert(graph[*e].id);
    }
    for (auto [e, end] = boost::edges(graph); e != end; ++e)
      if (graph[graph[*e].from].node < 0 && graph[graph[*e].to].node < 0)
        ids.insert(graph[*e].id);
    std::map<std::uint32_t, std::uint32_t> tracked_class; // folded: a class's link direction -> its tracked index
    for (std::size_t id : ids)
      for (bool forward : {true, false}) {
        const auto d = topology::directed(id, forward);
        if (g_.folded && g_.link_weight[d] == 0) { // not simulated: its usage from the meters of the flows crossing it
          unsimulated_index_[d] = static_cast<std::uint32_t>(tracked_.size());
          reported_.emplace_back(id, forward, static_cast<std::uint32_t>(tracked_.size()));
          tracked_.push_back(nullptr);
          usage_.push_back(Usage{});
          continue;
        }
        const auto c = g_.folded ? g_.link_class[d] : d;
        auto* link = platform_.link[c / 2];
        if (link == nullptr) { // a folded platform has only the links its flows cross: this one carries nothing
          reported_.emplace_back(id, forward, idle);
          continue;
        }
        const auto [at, added] = tracked_class.try_emplace(c, static_cast<std::uint32_t>(tracked_.size()));
        if (added) {
          auto* direction = c % 2 == 0 ? link->get_link_up() : link->get_link_down();
          tracked_index_[direction] = at->second;
          tracked_.push_back(direction);
          usage_.push_back(Usage{});
        }
        reported_.emplace_back(id, forward, at->second);
      }
    flows_.assign(tracked_.size(), 0);
    shared_.assign(tracked_.size(), 0);
    busy_at_.assign(tracked_.size(), 0);
    touched_at_.assign(tracked_.size(), 0);
    unsimulated_usage_.assign(tracked_.size(), 0.0);
    lone_usage_.assign(tracked_.size(), 0.0);
    metered_flows_.assign(g_.endpoints.size(), 0);
    lone_meter_usage_.assign(g_.endpoints.size(), 0.0);
  }

  // Folded, each link carries what the link standing for its class carried (a link between the switches of a
  // non-blocking network, not simulated, what the classes of flows crossing it carried: counted in route_of).
  void spread_link_bytes()
  {
    auto& forward = timeline_.link_bytes_forward;
    auto& backward = timeline_.link_bytes_backward;
    for (std::size_t id = 0; id < forward.size(); ++id)
      for (bool f : {true, false}) {
        const auto d = topology::directed(id, f);
        const auto c = g_.link_class[d];
        if (g_.link_weight[d] > 0)
          (f ? forward : backward)[id] = (c % 2 == 0 ? forward : backward)[c / 2];
      }
  }

  void check_complete() const
  {
    if (finished_ == g_.size())
      return;
    // Name the first tasks that never ran: those still waiting for a dependency (a cycle), or started and unfinished.
    std::string stuck;
    int shown = 0;
    for (TaskId t = 0; t < g_.size() && shown < 5; ++t) {
      if (timeline_.tasks[t].end_s >= 0 || g_[t].kind == TaskKind::SYNC)
        continue;
      const auto& task = g_[t];
      stuck += fmt::format("{}task {} ({} on rank {}, stage {}, micro-batch {}, {}{})", shown ? "; " : "", t,
                           core::choice_name(task.kind, workload::task_kind_choices), task.rank, task.stage,
                           task.microbatch, g_.label_text(task.label),
                           pending_[t] > 0 ? fmt::format(", {} dependencies unfinished", pending_[t]) : ", started");
      ++shown;
    }
    throw SimulationError(fmt::format("the simulation stalled: {} of {} tasks never finished; first waiting: {}",
                                      g_.size() - finished_, g_.size(), stuck.empty() ? "only syncs" : stuck));
  }

  const workload::TaskGraph& g_;
  const topology::ClusterGraph& cluster_;
  const std::map<std::uint64_t, std::size_t> copies_;            // folded: per copy's key, its endpoint
  const std::vector<std::vector<workload::Crossing>> crossings_; // per folded endpoint
  Platform platform_;
  const ProgressFn& progress_;
  core::BigVector<std::uint32_t> pending_;
  // Own bookkeeping of the bytes on each link direction (topology::directed): exact, unlike SimGrid's link-load plugin,
  // and in whole bytes (what SimGrid moves), so that the sums do not depend on the order flows end in.
  std::vector<std::uint64_t> link_bytes_;
  // The flows in SimGrid now (by their activity: the task and a reference that keeps the activity alive).
  std::unordered_map<const sg4::Activity*, std::pair<TaskId, sg4::CommPtr>> in_flight_;
  std::vector<sg4::CommPtr> released_;
  std::vector<GpuLoad> load_; // per GPU host
  std::deque<TaskId> ready_;
  std::size_t finished_ = 0;
  std::unordered_map<std::uint64_t, Route> routes_; // by (rank, peer)
  static constexpr int route_cache_bits = 12;
  std::vector<std::pair<std::uint64_t, const Route*>> route_cache_ =
      std::vector<std::pair<std::uint64_t, const Route*>>(std::size_t{1} << route_cache_bits, {0, nullptr});
  std::vector<sg4::Link*> tracked_;
  std::unordered_map<const sg4::Link*, std::uint32_t> tracked_index_;
  std::vector<std::uint32_t> flows_;     // per tracked link, flows on it now
  std::vector<std::uint32_t> shared_;    // per tracked link, those of them in SimGrid
  std::vector<std::uint32_t> busy_;      // the tracked links with flows, in no order
  std::vector<std::uint32_t> busy_at_;   // per tracked link with flows, its place in busy_
  std::uint32_t unsimulated_busy_ = 0;   // of them, links not simulated
  std::vector<std::uint32_t> touched_;   // tracked links whose flows changed since the clock last advanced (once each)
  std::vector<std::uint8_t> touched_at_; // per tracked link, 1 while in touched_
  std::vector<Usage> usage_;
  // Links not simulated (folded: between a non-blocking network's switches): tracked index by link direction, their
  // usage summed from the meters, the flows in flight per endpoint, and the endpoints with flows.
  std::unordered_map<std::uint32_t, std::uint32_t> unsimulated_index_;
  std::vector<double> unsimulated_usage_;
  std::vector<std::uint32_t> metered_flows_;
  std::set<std::uint32_t> metering_;
  // Lone flows (ReplayOptions::lone_flows): per SimGrid link a flow may share, its index's flows in flight (lone or
  // in SimGrid), the lone flow on it (at most one: alone), its bandwidth, and the timing of that flow where the link
  // is the first on its route; per tracked link and per meter, the rates of the lone flows crossing it.
  const bool lone_flows_;
  std::set<const sg4::Link*> never_limits_; // unfolded: the links between a non-blocking network's switches
  std::unordered_map<const sg4::Link*, std::uint32_t> link_index_;
  std::vector<std::uint32_t> link_flows_;
  std::vector<TaskId> link_lone_;
  std::vector<double> link_bandwidth_;
  std::vector<Lone> lone_timing_;
  std::vector<double> lone_usage_;
  std::vector<double> lone_meter_usage_;
  bool flows_changed_ = false; // since the clock last advanced
  EventQueue events_;
  double now_ = 0; // the replay's clock: SimGrid's, or ahead of it while no flow is in SimGrid
  simgrid::kernel::timer::Timer* armed_ = nullptr;
  double armed_at_ = 0;
  static constexpr std::uint32_t idle = std::numeric_limits<std::uint32_t>::max(); // a reported link without flows
  static constexpr std::uint32_t no_peer = std::numeric_limits<std::uint32_t>::max();
  std::vector<std::tuple<std::size_t, bool, std::uint32_t>> reported_; // (link, direction, tracked index) reported
  Timeline timeline_;
};

} // namespace

Timeline replay(const workload::TaskGraph& tasks, const topology::ClusterGraph& cluster, const ProgressFn& progress,
                const ReplayOptions& options)
{
  // What the replay and then the metrics allocate besides the graph, in huge pages: about 50 bytes a task on
  // buy-llama3-405b-h100, most of it the links' usage series.
  core::reserve_heap_in_huge_pages(64 * tasks.size());
  xbt_log_control_set("root.thresh:critical");
  sg4::Engine engine("simtrain");
  configure_network_model();
  Replayer replayer(tasks, cluster, progress, options);
  return replayer.run();
}

} // namespace sim::engine
