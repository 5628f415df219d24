#include "plan/schedule.hpp"

#include <algorithm>
#include <array>

namespace sim::plan {
namespace {

// Megatron-LM's interleaved schedule: virtual micro-batch k runs chunk (k mod pv) / p of micro-batch
// (k / pv) * p + k mod p; backward passes visit the chunks in reverse.
PassRef interleaved_pass(const plan::ParallelPlan& p, int k, Pass pass)
{
  const int group = p.pp * p.virtual_stages;
  int chunk = (k % group) / p.pp;
  if (pass == Pass::BACKWARD)
    chunk = p.virtual_stages - 1 - chunk;
  return PassRef{pass, chunk, (k / group) * p.pp + k % p.pp};
}

// A GPU's loop under DualPipe or DualPipeV, transliterated from deepseek-ai/DualPipe's step() (dualpipe.py and
// dualpipev.py, 2025): the same eight steps in both, over num_half_ranks and half_rank (DualPipe) or num_ranks and
// rank (DualPipeV). "Phase" is the module a call names; DualPipe's second half of the ranks swaps them, so that
// module 0 is always the first path's.
class DualPipeLoop {
 public:
  DualPipeLoop(const plan::ParallelPlan& p, int stage)
      : p_(p), stage_(stage), v_(p.schedule == plan::Schedule::DUALPIPE_V), n_(v_ ? p.pp : p.pp / 2),
        h_(v_ ? stage : std::min(stage, p.pp - 1 - stage)), chunks_(static_cast<int>(p.microbatches()) / (v_ ? 1 : 2)),
        swap_(!v_ && stage >= p.pp / 2)
  {}

  std::vector<PipelineOp> run()
  {
    const bool middle = h_ == n_ - 1;           // DualPipe's middle ranks, DualPipeV's last rank
    for (int i = 0; i < (n_ - h_ - 1) * 2; ++i) // step 1: nF0
      forward_chunk(0);
    const int step_2 = h_ + 1; // step 2: nF0F1
    recv_forward(0);
    for (int i = 0; i < step_2; ++i) {
      forward_chunk(0, false, middle);
      recv_forward(0);
      forward_chunk(1, true, !middle || i < step_2 - 1);
      if (!middle)
        send_forward(0);
    }
    for (int i = 0; i < n_ - h_ - 1; ++i) { // step 3: nB1W1F1, zero bubble
      backward_chunk(1, true);
      recv_forward(1);
      weight_chunk();
      forward_chunk(1, false);
    }
    const int step_4 = chunks_ - 2 * n_ + h_ + 1; // step 4, the main one: nF0B1F1B0
    for (int i = 0; i < step_4; ++i) {
      if (i == 0 && middle) { // not overlapped, to shorten the bubble
        forward_chunk(0, false, false);
        send_forward(1);
        backward_chunk(1, false, true, false);
        send_forward(0);
        send_backward(1);
      } else {
        forward_backward_chunk(0, 1, i > 0);
      }
      forward_backward_chunk(1, 0);
    }
    for (int i = 0; i < n_ - h_ - 1; ++i) { // step 5: nB1F1B0
      backward_chunk(1);
      forward_backward_chunk(1, 0);
    }
    const int step_6 = h_ + 1; // step 6: nB1B0, the second half with zero bubble
    bool zero_bubble = false;
    for (int i = 0; i < step_6; ++i) {
      if (i == step_6 / 2 && h_ % 2 == 1)
        zero_bubble = true;
      backward_chunk(1, zero_bubble);
      if (i == step_6 / 2 && h_ % 2 == 0)
        zero_bubble = true;
      backward_chunk(0, zero_bubble);
    }
    for (int i = 0; i < n_ - h_ - 1; ++i) { // step 7: nWB0, zero bubble
      weight_chunk();
      backward_chunk(0, true);
    }
    for (int i = 0; i < h_ + 1; ++i) // step 8: nW
      weight_chunk();
    return std::move(ops_);
  }

 private:
  int module(int phase) const { return phase ^ (swap_ ? 1 : 0); }
  int vs(int module) const { return p_.virtual_stage(stage_, module); }
  // The micro-batch of the module's j-th pass: DualPipe's second path carries the second half.
  int microbatch(int module, int j) const { return (v_ ? 0 : module * chunks_) + j; }
  // Whether the pass before (after) this module's on a micro-batch's path runs elsewhere: there is something to
  // receive or send (DualPipeV's last GPU hands its output from one chunk to the other itself).
  bool from_elsewhere(int m) const { return !p_.path_start(vs(m)) && p_.stage_of(vs(m) - 1) != stage_; }
  bool to_elsewhere(int m) const { return !p_.path_end(vs(m)) && p_.stage_of(vs(m) + 1) != stage_; }

  void post(PipelineOp::Kind kind, Pass pass, int m, int& counter)
  {
    ops_.push_back(PipelineOp{kind, PassRef{pass, m, microbatch(m, counter++), false}, false, {}});
  }
  void recv_forward(int phase)
  {
    if (from_elsewhere(module(phase)))
      post(PipelineOp::Kind::RECEIVE, Pass::FORWARD, module(phase), recv_f_[module(phase)]);
  }
  void send_forward(int phase)
  {
    if (to_elsewhere(module(phase)))
      post(PipelineOp::Kind::SEND, Pass::FORWARD, module(phase), send_f_[module(phase)]);
  }
  void recv_backward(int phase)
  {
    if (to_elsewhere(module(phase)))
      post(PipelineOp::Kind::RECEIVE, Pass::BACKWARD, module(phase), recv_b_[module(phase)]);
  }
  void send_backward(int phase)
  {
    if (from_elsewhere(module(phase)))
      post(PipelineOp::Kind::SEND, Pass::BACKWARD, module(phase), send_b_[module(phase)]);
  }
  void wait() { ops_.push_back(PipelineOp{}); }
  PassRef forward(int phase)
  {
    const int m = module(phase);
    return PassRef{Pass::FORWARD, m, microbatch(m, f_[m]++), false};
  }
  PassRef backward(int phase, bool zero_bubble)
  {
    const int m = module(phase);
    const PassRef b{Pass::BACKWARD, m, microbatch(m, b_[m]++), zero_bubble};
    if (zero_bubble)
      deferred_.push_back(PassRef{Pass::WEIGHT, m, b.microbatch, false});
    return b;
  }
  void run(const PassRef& pass) { ops_.push_back(PipelineOp{PipelineOp::Kind::RUN, pass, false, {}}); }

  void forward_chunk(int phase, bool recv = true, bool send = true)
  {
    if (recv)
      recv_forward(phase);
    wait();
    run(forward(phase));
    if (send)
      send_forward(phase);
  }
  void backward_chunk(int phase, bool zero_bubble = false, bool recv = true, bool send = true)
  {
    if (recv)
      recv_backward(phase);
    wait();
    run(backward(phase, zero_bubble));
    if (send)
      send_backward(phase);
  }
  void forward_backward_chunk(int phase0, int phase1, bool recv0 = true)
  {
    if (recv0)
      recv_forward(phase0);
    recv_backward(phase1);
    wait();
    const PassRef f = forward(phase0);
    ops_.push_back(PipelineOp{PipelineOp::Kind::RUN, f, true, backward(phase1, false)});
    send_forward(phase0);
    send_backward(phase1);
  }
  void weight_chunk() // the oldest deferred weight gradients (WeightGradStore is a FIFO)
  {
    wait();
    run(deferred_.front());
    deferred_.erase(deferred_.begin());
  }

  const plan::ParallelPlan& p_;
  int stage_;
  bool v_;
  int n_, h_, chunks_;
  bool swap_;
  std::array<int, 2> f_{}, b_{}, recv_f_{}, recv_b_{}, send_f_{}, send_b_{};
  std::vector<PassRef> deferred_;
  std::vector<PipelineOp> ops_;
};

} // namespace

std::vector<PipelineOp> dualpipe_ops(const plan::ParallelPlan& p, int stage)
{
  return DualPipeLoop(p, stage).run();
}

std::vector<PassRef> stage_order(const plan::ParallelPlan& p, int stage)
{
  const auto m = static_cast<int>(p.microbatches());
  std::vector<PassRef> order;
  switch (p.schedule) {
    case plan::Schedule::GPIPE:
      for (int i = 0; i < m; ++i)
        order.push_back({Pass::FORWARD, 0, i});
      for (int i = 0; i < m; ++i)
        order.push_back({Pass::BACKWARD, 0, i});
      break;
    case plan::Schedule::ONE_F_ONE_B: {
      const int warmup = std::min(p.pp - stage - 1, m);
      for (int i = 0; i < warmup; ++i)
        order.push_back({Pass::FORWARD, 0, i});
      for (int i = 0; i < m - warmup; ++i) {
        order.push_back({Pass::FORWARD, 0, warmup + i});
        order.push_back({Pass::BACKWARD, 0, i});
      }
      for (int i = m - warmup; i < m; ++i)
        order.push_back({Pass::BACKWARD, 0, i});
      break;
    }
    case plan::Schedule::INTERLEAVED: {
      const int total = m * p.virtual_stages;
      const int warmup = std::min((p.pp - stage - 1) * 2 + (p.virtual_stages - 1) * p.pp, total);
      for (int k = 0; k < warmup; ++k)
        order.push_back(interleaved_pass(p, k, Pass::FORWARD));
      for (int k = 0; k < total - warmup; ++k) {
        order.push_back(interleaved_pass(p, warmup + k, Pass::FORWARD));
        order.push_back(interleaved_pass(p, k, Pass::BACKWARD));
      }
      for (int k = total - warmup; k < total; ++k)
        order.push_back(interleaved_pass(p, k, Pass::BACKWARD));
      break;
    }
    case plan::Schedule::DUALPIPE:
    case plan::Schedule::DUALPIPE_V:
      for (const PipelineOp& op : dualpipe_ops(p, stage))
        if (op.kind == PipelineOp::Kind::RUN) {
          order.push_back(op.pass);
          if (op.paired)
            order.push_back(op.beside);
        }
      break;
  }
  return order;
}

} // namespace sim::plan
