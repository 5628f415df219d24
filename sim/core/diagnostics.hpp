// What simtrain says on stderr besides its results (errors, warnings, notes, progress): lines for a terminal, or one
// JSON object per line for pipelines (--log-format json).
#pragma once

#include "core/input_error.hpp"

#include <string>

namespace sim::core {

enum class DiagnosticFormat { TEXT, JSON };

// Applies to every diagnostic from then on (set once, before any command runs).
void set_diagnostic_format(DiagnosticFormat format);
DiagnosticFormat diagnostic_format();

// One diagnostic: `text` as a terminal shows it, or {"level", "message", and "file", "pointer", "set_by" where
// known} as JSON. `level`: "error", "warning", "note" or "progress".
void diagnose(const std::string& level, const std::string& text, const std::string& message,
              const Location* where = nullptr);

// An input error, as `error: FILE:/pointer: problem (found X; expected Y)`.
void diagnose_error(const InputError& e);
// A warning, as format_warning writes it.
void diagnose_warning(const Warning& w);

} // namespace sim::core
