#include "plan/optimizer_state.hpp"

namespace sim::plan {
namespace {

constexpr double fp32 = 4.0;
// bitsandbytes' Optimizer2State with block_wise: one fp32 absmax per 256 values of each 8-bit state
// (bitsandbytes/optim/optimizer.py: blocks = n // 256).
constexpr double bnb_block = 256.0;

} // namespace

double optimizer_state_bytes(OptimizerAlgorithm algorithm, double hidden, bool master_weights)
{
  const double master = master_weights ? fp32 : 0.0;
  switch (algorithm) {
    case OptimizerAlgorithm::ADAM: // exp_avg, exp_avg_sq
      return master + 2.0 * fp32;
    case OptimizerAlgorithm::SGD:  // torch.optim.SGD's momentum_buffer
    case OptimizerAlgorithm::LION: // exp_avg
      return master + fp32;
    case OptimizerAlgorithm::ADAM_8BIT: // state1, state2 (uint8) and their absmax1, absmax2
      return master + 2.0 * (1.0 + fp32 / bnb_block);
    case OptimizerAlgorithm::ADAFACTOR:
      // exp_avg_sq_row and exp_avg_sq_col of an r x c matrix: 4 (r + c) bytes, at most 8 / hidden a parameter when
      // both sides are at least the model's width (transformers' Adafactor, beta1 None: no exp_avg).
      return master + 2.0 * fp32 / hidden;
  }
  return master + 2.0 * fp32;
}

double optimizer_update_bytes(OptimizerAlgorithm algorithm)
{
  switch (algorithm) {
    case OptimizerAlgorithm::ADAM: // gradient; weight, exp_avg, exp_avg_sq read and written (apex FusedAdam)
      return fp32 + 3.0 * 2.0 * fp32;
    case OptimizerAlgorithm::SGD:  // gradient; weight and momentum (torch's fused SGD)
    case OptimizerAlgorithm::LION: // gradient; weight and exp_avg (bitsandbytes' 32-bit Lion kernel)
      return fp32 + 2.0 * 2.0 * fp32;
    case OptimizerAlgorithm::ADAM_8BIT: // gradient; weight; the two 8-bit states (bitsandbytes' blockwise kernel)
      return fp32 + 2.0 * fp32 + 2.0 * 2.0;
    case OptimizerAlgorithm::ADAFACTOR:
      // transformers' Adafactor.step, kernel by kernel over fp32 tensors of the parameter's size: RMS of the weight
      // (read), grad**2 and + eps (read and write each), the row and column means (two reads), the factors' outer
      // product (write), update.mul_(grad) (two reads, a write), RMS of the update (read), div_ and mul_(lr) (a read
      // and a write each), -update (read, write) and the weight's add_ (two reads, a write): 21 passes.
      return 21.0 * fp32;
  }
  return fp32 + 3.0 * 2.0 * fp32;
}

} // namespace sim::plan
