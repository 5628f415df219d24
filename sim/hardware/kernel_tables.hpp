// Measured kernel throughput of one GPU chip (kernels/v1): 16-bit GEMMs by shape, FP8 GEMMs' speed-up over them
// where measured, and fused attention by implementation, sequence length and head size, each row with its source.
// Shared by the catalogue entries of parts with the same chip and clocks (A100 40 GB / 80 GB / A800; H100 / H800), and
// interpolated between the measured rows.
#pragma once

#include "core/json_reader.hpp"
#include "hardware/kernel_classes.hpp"

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace sim::hardware {

struct GemmSample {
  double m = 0, n = 0, k = 0, batch = 1;
  GemmLayout layout = GemmLayout::FORWARD;
  double rate = 0; // FLOP/s as measured
  std::string source;
  bool operator==(const GemmSample&) const = default;
};

// FP8 GEMM throughput over 16-bit's at one shape, both measured side by side on the chip.
struct Fp8GemmSample {
  double m = 0, n = 0, k = 0, batch = 1;
  GemmLayout layout = GemmLayout::FORWARD;
  double speedup = 1;
  std::string source;
  bool operator==(const Fp8GemmSample&) const = default;
};

struct AttentionSample {
  AttentionImpl impl = AttentionImpl::FLASH2;
  AttentionPass pass = AttentionPass::FORWARD;
  bool causal = true;
  double head_dim = 0;
  double seq = 0;
  double rate = 0; // FLOP/s, causal attention counting half the score matrix (FlashAttention's convention)
  std::string source;
  bool operator==(const AttentionSample&) const = default;
};

// How far below its full rate an attention kernel runs when its (head, 128-query block) tiles fill the SMs only a
// few times: the rate's fraction at `waves` = tiles / SMs.
struct OccupancySample {
  AttentionImpl impl = AttentionImpl::FLASH2;
  AttentionPass pass = AttentionPass::FORWARD;
  double waves = 0;
  double fraction = 1;
  std::string source;
  bool operator==(const OccupancySample&) const = default;
};

// A fused attention kernel as the tables look it up.
struct AttentionKernel {
  AttentionImpl impl = AttentionImpl::FLASH2;
  KernelPass pass = KernelPass::FORWARD;
  bool causal = true;
  double seq = 0;      // sequence length
  double head_dim = 0; // head size
  double heads = 0;    // batch x heads on the GPU; 0 when unknown
};

class KernelTables {
 public:
  std::string name;
  std::string description;
  int sms = 0;          // the chip's SMs: the wave quantisation of the table's own prior
  double gemm_best = 0; // the best GEMM rate of a shape sweep (MAMF): the large-shape limit
  std::vector<GemmSample> gemm;
  std::vector<Fp8GemmSample> fp8_gemm; // empty: the chip was not measured in FP8
  std::vector<AttentionSample> attention;
  std::vector<OccupancySample> attention_occupancy;
  std::map<std::string, std::string> sources; // source key of a row, or a field -> where it comes from

  // The rate a 16-bit GEMM of this shape runs at: the measured rows' ratio to a roofline (gemm_best with wave
  // quantisation), interpolated in log space around the nearest measured shapes, times that roofline at the query;
  // never above gemm_best. Every layout's rows count alike: cuBLAS runs the forward (NT) and data-gradient (NN)
  // layouts within 2 % of each other on A100 and H100 (deepreinforce-ai/CUDA-L2 eval_results, 1,000 shapes).
  double gemm_rate(double m, double n, double k, double batch) const;

  // FP8 GEMM throughput over 16-bit's at this shape: the measured speed-ups, interpolated in log space around the
  // nearest measured shapes as gemm_rate's corrections are (every pass's rows alike: Transformer Engine runs each FP8
  // GEMM in the one layout FP8 tensor cores take); nullopt when the table has no FP8 rows.
  std::optional<double> fp8_speedup(double m, double n, double k, double batch) const;

  // The rate of a fused attention kernel's forward or backward pass, interpolated over sequence length and head size
  // among the rows of the implementation (the same causality preferred): the pass's own rows, else the combined
  // forward+backward rows; nullopt when the table has neither. The curves are measured with many heads (16k tokens
  // of hidden 2048); the kernel's `heads` (0 when unknown) scale the rate by the occupancy curve.
  std::optional<double> attention_rate(const AttentionKernel& kernel) const;

  // The fraction of its full rate an attention kernel of `heads` x ceil(seq / 128) tiles reaches: the occupancy
  // curve of its implementation (FlashAttention-2's for an implementation without one), piecewise linear in log2 of
  // the waves, held at the first row below it and 1 beyond the last; 1 without a curve or with heads 0.
  double attention_occupancy_fraction(const AttentionKernel& kernel) const;

  // The table's own roofline for a GEMM shape: gemm_best times the wave quantisation of 128 x 128 output tiles.
  double gemm_prior(double m, double n, double batch) const;

  // The same measurements, whatever the name, description and sources say (and the caches built on first use).
  bool operator==(const KernelTables& other) const;

 private:
  struct Point {
    double x[4]; // log2 of m, n, k, batch
    double correction;
  };
  mutable std::vector<Point> points_, fp8_points_; // built on first use
  mutable std::map<std::array<double, 4>, double> cache_, fp8_cache_;
  void prepare() const;
};

// Reads a kernels/v1 object.
std::shared_ptr<const KernelTables> read_kernel_tables(const core::Node& node);

} // namespace sim::hardware
