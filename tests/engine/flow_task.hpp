// A lowered flow as the transfer task the replay runs (engine tests build their graphs from flows directly).
#pragma once

#include "workload/collectives.hpp"
#include "workload/task_graph.hpp"

namespace test {

inline sim::workload::Task transfer_of(const sim::workload::Flow& f)
{
  sim::workload::Task t;
  t.kind = sim::workload::TaskKind::TRANSFER;
  t.rank = f.src;
  t.peer = f.dst;
  t.bytes = f.bytes;
  t.latency_s = f.latency_s;
  return t;
}

} // namespace test
