#include "engine/transfers.hpp"

#include "engine/platform.hpp"

#include <simgrid/kernel/Timer.hpp>
#include <xbt/log.h>

namespace sim::engine {
namespace sg4 = simgrid::s4u;

TransferRun simulate_transfers(const topology::ClusterGraph& g, const std::vector<Transfer>& transfers)
{
  xbt_log_control_set("root.thresh:critical");
  sg4::Engine engine("simtrain");
  configure_network_model();
  const Platform platform = build_platform(g);

  TransferRun run;
  run.transfers.resize(transfers.size());
  run.bytes_forward.assign(boost::num_edges(g.graph), 0.0);
  run.bytes_backward.assign(boost::num_edges(g.graph), 0.0);
  std::vector<sg4::CommPtr> comms(transfers.size());

  for (std::size_t i = 0; i < transfers.size(); ++i) {
    const Transfer& t = transfers[i];
    const auto path = topology::route(g, t.src_gpu, t.dst_gpu);
    const auto forward = topology::link_directions(g, g.gpu[static_cast<std::size_t>(t.src_gpu)], path);
    for (std::size_t k = 0; k < path.size(); ++k)
      (forward[k] ? run.bytes_forward : run.bytes_backward)[g.graph[path[k]].id] += t.bytes;
    run.transfers[i].start_s = t.start_s;
    comms[i] = sg4::Comm::sendto_init(platform.gpu[static_cast<std::size_t>(t.src_gpu)],
                                      platform.gpu[static_cast<std::size_t>(t.dst_gpu)]);
    comms[i]->set_payload_size(static_cast<std::uint64_t>(t.bytes));
    comms[i]->set_data(&run.transfers[i]);
    const double ready = t.start_s + topology::route_latency(g, path) + t.extra_latency_s;
    sg4::CommPtr comm = comms[i];
    simgrid::kernel::timer::Timer::set(ready, [comm]() { comm->vetoable_start(); });
  }
  sg4::Activity::on_completion_cb([](const sg4::Activity& a) {
    if (auto* timing = a.get_data<TransferTiming>())
      timing->end_s = a.get_finish_time();
  });
  engine.run();
  run.end_s = sg4::Engine::get_clock();
  return run;
}

} // namespace sim::engine
