// The replay's own event queue (engine/events): time order, a dispatch last in its instant, otherwise first scheduled
// first.
#include "engine/events.hpp"

#include <catch2/catch.hpp>

using sim::engine::EventKind;

TEST_CASE("the replay's events come in time order, and at one instant in the order they were scheduled")
{
  sim::engine::EventQueue q;
  q.schedule(2.0, EventKind::FINISH, 1);
  q.schedule(1.0, EventKind::LAUNCH, 2);
  q.schedule(1.0, EventKind::COMPUTE_END, 3, 7);
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
