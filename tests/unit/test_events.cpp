// The replay's own event queue (engine/events): time order, a dispatch last in its instant, otherwise first scheduled
// first.
#include "engine/events.hpp"

#include <algorithm>
#include <catch2/catch.hpp>

using sim::engine::EventKind;

TEST_CASE("the replay's events come in time order, and at one instant in the order they were scheduled")
{
  sim::engine::EventQueue q;
  q.schedule(2.0, EventKind::FINISH, 1);
  q.schedule(1.0, EventKind::LAUNCH, 2);
  q.schedule(1.0, EventKind::COMPUTE_END, 3);
  q.schedule(0.5, EventKind::LONE_END, 4);
  std::vector<std::uint32_t> ids;
  while (!q.empty())
    ids.push_back(q.pop().id);
  CHECK(ids == std::vector<std::uint32_t>{4, 2, 3, 1});
}

TEST_CASE("a dispatch comes after every other event of its instant, even one scheduled after it")
{
  sim::engine::EventQueue q;
  q.schedule(1.0, EventKind::DISPATCH, 1);
  q.schedule(1.0, EventKind::FINISH, 2);
  q.schedule(1.0, EventKind::DISPATCH, 3);
  q.schedule(0.5, EventKind::DISPATCH, 4);
  CHECK(q.next().id == 4);
  std::vector<std::uint32_t> ids;
  while (!q.empty())
    ids.push_back(q.pop().id);
  CHECK(ids == std::vector<std::uint32_t>{4, 2, 1, 3});
}

TEST_CASE("a keyed event moves, earlier or later, and leaves nothing behind (it ties as if scheduled when moved)")
{
  sim::engine::EventQueue q;
  q.move(3.0, EventKind::COMPUTE_END, 0);
  q.move(1.0, EventKind::COMPUTE_END, 1);
  q.schedule(2.0, EventKind::LAUNCH, 10);
  q.move(0.5, EventKind::COMPUTE_END, 0); // earlier
  q.move(2.0, EventKind::COMPUTE_END, 1); // later: after the launch at 2.0, scheduled before this move
  q.schedule(2.0, EventKind::LONE_END, 11);
  q.move(4.0, EventKind::COMPUTE_END, 2);
  q.move(2.0, EventKind::COMPUTE_END, 2);
  std::vector<std::pair<double, std::uint32_t>> popped;
  while (!q.empty()) {
    const auto e = q.pop();
    popped.emplace_back(e.time, e.id);
  }
  CHECK(popped == std::vector<std::pair<double, std::uint32_t>>{{0.5, 0}, {2.0, 10}, {2.0, 1}, {2.0, 11}, {2.0, 2}});
}

TEST_CASE("a keyed event popped may be set again, and many keyed events come out in order")
{
  sim::engine::EventQueue q;
  for (std::uint32_t id = 0; id < 64; ++id)
    q.move(static_cast<double>((id * 37) % 64), EventKind::COMPUTE_END, id);
  for (std::uint32_t id = 0; id < 64; id += 2) // every other one moved past all the rest
    q.move(100.0 + id, EventKind::COMPUTE_END, id);
  std::vector<double> times;
  while (!q.empty()) {
    times.push_back(q.next().time);
    const auto e = q.pop();
    CHECK(e.time == times.back());
    if (e.id == 1 && e.time < 50.0) // set again after it came out
      q.move(50.0, EventKind::COMPUTE_END, 1);
  }
  CHECK(times.size() == 65);
  CHECK(std::is_sorted(times.begin(), times.end()));
  CHECK(std::count(times.begin(), times.end(), 50.0) == 1);
}
