// What one GPU can do: peak FLOP/s per precision, memory size and bandwidth, links, measured efficiencies, price.
#pragma once

#include "core/json_reader.hpp"
#include "hardware/kernel_tables.hpp"

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace sim::hardware {

// Tensor-core modes a catalogue entry may list (FP4: Blackwell's, listed for buyers; no plan trains in it yet).
enum class Precision { BF16, FP16, FP8, TF32, FP32, FP4 };

inline constexpr std::array<core::Choice<Precision>, 6> precision_choices{{{"bf16", Precision::BF16},
                                                                           {"fp16", Precision::FP16},
                                                                           {"fp8", Precision::FP8},
                                                                           {"tf32", Precision::TF32},
                                                                           {"fp32", Precision::FP32},
                                                                           {"fp4", Precision::FP4}}};

// Who makes the part: what its GPU-to-GPU links are called (NVIDIA's NVLink, AMD's Infinity Fabric), in reports.
enum class Vendor { NVIDIA, AMD };

inline constexpr std::array<core::Choice<Vendor>, 2> vendor_choices{{{"nvidia", Vendor::NVIDIA}, {"amd", Vendor::AMD}}};

// Achieved bandwidth of a class of memory-bound kernels, as a fraction of the nominal HBM bandwidth.
struct MemoryKernelRate {
  double forward = 0;
  double backward = 0;
  bool operator==(const MemoryKernelRate&) const = default;
};

struct GpuSpec {
  std::string name;
  std::string description;
  Vendor vendor = Vendor::NVIDIA;
  std::map<Precision, double> peak_flops; // dense FLOP/s per precision (no sparsity)
  double memory_bytes = 0;
  double memory_bandwidth = 0; // bytes/s
  int sms = 0;                 // streaming multiprocessors (0: unknown, no wave quantisation)
  double nvlink_bandwidth = 0; // bytes/s per direction per GPU; 0 without NVLink
  int pcie_generation = 0;
  // The driver lets GPUs of this kind read and write each other's memory over PCIe, and NICs reach it directly
  // (GPUDirect RDMA). GeForce cards have neither: their traffic to another GPU or a NIC is staged in host memory.
  bool peer_to_peer = true;
  // CUDA compute capability (9.0 for Hopper); 0 for parts that are not NVIDIA's. NCCL picks its tuning by it.
  double compute_capability = 0;
  // Sustained large-matmul FLOP/s / peak. Above 1 where a card runs its tensor cores above the rated boost clock its
  // datasheet peak is computed at (GeForce cards under GPU Boost).
  double gemm_efficiency = 0;
  double memory_efficiency = 0;             // achievable / nominal memory bandwidth; 0 when not measured
  double attention_efficiency = 0;          // fused attention FLOP/s / peak; 0 when not measured
  double attention_backward_efficiency = 0; // its backward pass's; 0: the forward's
  double kernel_overhead_s = 0;             // fixed time of every kernel (launch, prologue, tail)
  double nccl_nvlink_efficiency = 0;        // NCCL all-reduce bus bandwidth / NVLink nominal; 0 when not measured
  // NCCL's NVLink SHARP (NVLS) all-reduce algorithm bandwidth (buffer bytes / time: each GPU sends and receives the
  // buffer once) / NVLink nominal; 0: the part has no NVLS or it was not measured (then all-reduces run as rings).
  double nccl_nvls_efficiency = 0;
  // Best-shape FP8 GEMM throughput over BF16's, measured on the same chip: FP8 GEMMs run at the BF16 table's rate
  // times this. 0 when not measured (then the datasheet's FP8/BF16 peak ratio stands in).
  double fp8_gemm_speedup = 0;
  // Tensor-core throughput of a node under sustained training load, relative to the short benchmarks the
  // efficiencies and tables come from (power and thermal limits lower the clock); 1 when not measured.
  double sustained_compute_ratio = 1;
  // Range of that sustained throughput across the GPUs of a loaded node, as a fraction of its mean: a step that
  // synchronises several GPUs runs at its slowest; 0 when not measured.
  double sustained_spread = 0;
  std::map<MemoryKernel, MemoryKernelRate> memory_kernels; // measured classes; the others stream at memory_efficiency
  std::shared_ptr<const KernelTables> kernel_tables;       // measured GEMM and attention rates; null when none
  std::optional<double> list_price_usd;
  double tdp_w = 0;                           // board power (W); 0 when not given
  std::map<std::string, std::string> sources; // field -> where the number comes from

  // The fields whose source marks them a datasheet-only estimate (nothing measured on the part behind them), and
  // the efficiencies not measured on the part at all (nominal rates stand in).
  std::vector<std::string> estimates() const;

  // Peak FLOP/s for `p`; nullopt when the part has no such tensor-core mode.
  std::optional<double> peak(Precision p) const;
  // FP8 GEMM throughput over BF16's at the same shape (nullopt without an FP8 tensor-core mode).
  std::optional<double> fp8_speedup() const;
  // Fraction of the nominal HBM bandwidth a memory-bound kernel of this class achieves.
  double memory_kernel_efficiency(MemoryKernel kernel, KernelPass pass) const;
  bool operator==(const GpuSpec&) const = default;
};

// Reads a gpu/v1 object.
GpuSpec read_gpu(const core::Node& node);

} // namespace sim::hardware
