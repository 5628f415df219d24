// The replay's own events (engine/replay): kernels' ends, latencies, lone flows, host work and dispatches, kept in
// time order; SimGrid only shares links among the flows that meet. Pure: no SimGrid.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

namespace sim::engine {

enum class EventKind : std::uint8_t { COMPUTE_END, LAUNCH, LONE_END, FINISH, DISPATCH };

struct ReplayEvent {
  double time = 0;
  std::uint64_t order = 0;      // the phase in the top bit (a dispatch last), then the sequence it was scheduled in
  std::uint32_t id = 0;         // a task, or a GPU (COMPUTE_END, DISPATCH)
  std::uint32_t generation = 0; // COMPUTE_END: due only while its GPU's end is of this generation
  EventKind kind = EventKind::FINISH;
};

// Events by time; at one instant a dispatch after every other event, and otherwise in the order they were scheduled.
class EventQueue {
 public:
  void schedule(double time, EventKind kind, std::uint32_t id, std::uint32_t generation = 0)
  {
    constexpr std::uint64_t last_in_instant = std::uint64_t{1} << 63;
    heap_.push(
        ReplayEvent{time, (kind == EventKind::DISPATCH ? last_in_instant : 0) | scheduled_++, id, generation, kind});
  }
  bool empty() const { return heap_.empty(); }
  const ReplayEvent& next() const { return heap_.top(); }
  ReplayEvent pop()
  {
    const ReplayEvent e = heap_.top();
    heap_.pop();
    return e;
  }

 private:
  struct Later {
    bool operator()(const ReplayEvent& a, const ReplayEvent& b) const
    {
      return a.time != b.time ? a.time > b.time : a.order > b.order;
    }
  };
  std::priority_queue<ReplayEvent, std::vector<ReplayEvent>, Later> heap_;
  std::uint64_t scheduled_ = 0;
};

} // namespace sim::engine
