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
  std::uint64_t order = 0; // the phase in the top bit (a dispatch last), then the sequence it was scheduled in
  std::uint32_t id = 0;    // a task, or a GPU (COMPUTE_END, DISPATCH)
  EventKind kind = EventKind::FINISH;
};

// Events by time; at one instant a dispatch after every other event, and otherwise in the order they were scheduled.
// A keyed event (`move`) is one per id, moved as often as it changes (a GPU's kernel ends earlier or later as its
// speed changes): kept apart, so that a moved event leaves nothing behind to pop and skip.
class EventQueue {
 public:
  void schedule(double time, EventKind kind, std::uint32_t id) { heap_.push(event(time, kind, id)); }

  // The keyed event of `id` (of `kind`, the same for every id) at `time`, in place of the one it had pending: ordered
  // as if scheduled now.
  void move(double time, EventKind kind, std::uint32_t id)
  {
    if (id >= at_.size())
      at_.resize(id + 1, none);
    if (at_[id] == none) {
      at_[id] = keyed_.size();
      keyed_.push_back(event(time, kind, id));
      up(at_[id]);
      return;
    }
    const std::size_t i = at_[id];
    keyed_[i] = event(time, kind, id);
    up(i);
    down(at_[id]);
  }

  bool empty() const { return heap_.empty() && keyed_.empty(); }
  const ReplayEvent& next() const { return keyed_first() ? keyed_.front() : heap_.top(); }
  ReplayEvent pop()
  {
    if (keyed_first()) {
      const ReplayEvent e = keyed_.front();
      at_[e.id] = none;
      if (keyed_.size() > 1) {
        keyed_.front() = keyed_.back();
        at_[keyed_.front().id] = 0;
        keyed_.pop_back();
        down(0);
      } else {
        keyed_.pop_back();
      }
      return e;
    }
    const ReplayEvent e = heap_.top();
    heap_.pop();
    return e;
  }

 private:
  static constexpr std::size_t none = static_cast<std::size_t>(-1);
  static bool later(const ReplayEvent& a, const ReplayEvent& b)
  {
    return a.time != b.time ? a.time > b.time : a.order > b.order;
  }
  struct Later {
    bool operator()(const ReplayEvent& a, const ReplayEvent& b) const { return later(a, b); }
  };

  ReplayEvent event(double time, EventKind kind, std::uint32_t id)
  {
    constexpr std::uint64_t last_in_instant = std::uint64_t{1} << 63;
    return ReplayEvent{time, (kind == EventKind::DISPATCH ? last_in_instant : 0) | scheduled_++, id, kind};
  }
  bool keyed_first() const { return !keyed_.empty() && (heap_.empty() || later(heap_.top(), keyed_.front())); }

  // The keyed events' binary heap, earliest first, with each id's place in it (at_).
  void swap_places(std::size_t a, std::size_t b)
  {
    std::swap(keyed_[a], keyed_[b]);
    at_[keyed_[a].id] = a;
    at_[keyed_[b].id] = b;
  }
  void up(std::size_t i)
  {
    while (i > 0 && later(keyed_[(i - 1) / 2], keyed_[i])) {
      swap_places(i, (i - 1) / 2);
      i = (i - 1) / 2;
    }
  }
  void down(std::size_t i)
  {
    for (;;) {
      std::size_t first = i;
      for (const std::size_t child : {2 * i + 1, 2 * i + 2})
        if (child < keyed_.size() && later(keyed_[first], keyed_[child]))
          first = child;
      if (first == i)
        return;
      swap_places(i, first);
      i = first;
    }
  }

  std::priority_queue<ReplayEvent, std::vector<ReplayEvent>, Later> heap_;
  std::vector<ReplayEvent> keyed_;
  std::vector<std::size_t> at_; // per id, its keyed event's place in keyed_ (none: no event pending)
  std::uint64_t scheduled_ = 0;
};

} // namespace sim::engine
