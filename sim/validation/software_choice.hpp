// Which software ran a published case: its framework (from the source, the plan's framework field and the notes) and
// its date (from the source: commit dates, arXiv identifiers, years), turned into simtrain's software plan keys, each
// choice with the reason it was made. Pure: text in, values out.
#pragma once

#include "core/document.hpp"

#include <optional>
#include <string>
#include <vector>

namespace sim::validation {

// PYTORCH: a PyTorch model in eager mode under a fine-tuning framework (torchtune, Hugging Face Trainer with PEFT,
// LLaMA-Factory, LitGPT, the Qwen repository's finetune.py).
enum class Framework { MEGATRON, MEGATRON_DEEPSPEED, DEEPSPEED_ZERO3, COMPOSER, PYTORCH, AUTOMODEL, UNKNOWN };

// Year and month; months of a bare year count as June.
struct YearMonth {
  int year = 0;
  int month = 6;
  int value() const { return year * 12 + month - 1; }
};

// The latest date a text names: YYYY-MM(-DD), arXiv identifiers (YYMM.NNNNN), SC'YY, a release named by year and
// month ("NeMo 25.02", "Container: NeMo 26.04.01", "tag v24.11.1"), or a bare year 2015-2039.
std::optional<YearMonth> latest_date(const std::string& text);

struct SoftwareChoice {
  Framework framework = Framework::UNKNOWN;
  std::optional<YearMonth> date;
  core::Json plan;                      // software keys to merge into the scenario's plan
  std::vector<std::string> assumptions; // each choice and why
};

struct CaseText {
  std::string source;
  std::string framework{}; // the plan's framework field
  std::string notes{};
  int zero_stage = 0;
  bool fp32_accumulation = false;
  bool sequence_parallel = false;
  bool fp8 = false;      // the run trains in FP8, which Megatron-LM and NeMo do only through Transformer Engine
  bool compiled = false; // the model ran under torch.compile (its pointwise operations fused)
};

SoftwareChoice choose_software(const CaseText& text);

} // namespace sim::validation
