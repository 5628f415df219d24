// Physical quantities at the JSON edge: "450GBps", "400Gbps", "2us", "80GiB", "989Tf" -> SI doubles.
// Inside simtrain everything is bytes, seconds, bytes/s and FLOP/s; this is the only place units are parsed.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sim::core {

enum class Dimension { BYTES, BANDWIDTH, TIME, FLOP_RATE, POWER };

// The value in SI units (bytes, bytes/s, seconds, FLOP/s), or nullopt when `text` is not a number followed by a
// unit of `dimension`. Accepts SimGrid's spellings (decimal kB..PB, binary KiB..PiB, bits b..Tb, "ps" or "/s" for
// rates, s/ms/us/ns, f..Ef or flops, W/kW/MW) with an optional space between number and unit.
// The whole of `text` as a finite number ("0.1", "1e-2", "128"), without a unit.
std::optional<double> parse_number(std::string_view text);
std::optional<double> parse_quantity(std::string_view text, Dimension dimension);

// How to write one, for error messages: `a bandwidth such as "450GBps" or "400Gbps"`.
std::string describe(Dimension dimension);

// The values a physical field of this dimension can plausibly take (SI): beyond them a value is a typo or a unit
// mix-up (1 B to 1 PB, 1 MB/s to 1 PB/s, 1 ps to 1 year, 1 GFLOP/s to 10 EFLOP/s, 1 W to 1 GW).
struct Range {
  double min;
  double max;
  const char* text; // "from 1MBps to 1PBps", as it would be written
};
Range plausible_range(Dimension dimension);

// For people: "80.0 GiB", "450 GB/s", "1.25 ms", "312 TFLOP/s".
std::string format_quantity(double si_value, Dimension dimension);

inline std::string format_bytes(double bytes)
{
  return format_quantity(bytes, Dimension::BYTES);
}
inline std::string format_bandwidth(double bytes_per_s)
{
  return format_quantity(bytes_per_s, Dimension::BANDWIDTH);
}
inline std::string format_time(double seconds)
{
  return format_quantity(seconds, Dimension::TIME);
}
// Durations of a training run: minutes, hours or days beyond two of each, else as format_time.
std::string format_duration(double seconds);
// "$12.34", "$45.6k", "$1.23M".
std::string format_usd(double usd);

inline std::string format_flop_rate(double flop_per_s)
{
  return format_quantity(flop_per_s, Dimension::FLOP_RATE);
}

// "1.23e+15" style counts are hard to read: 175.0B, 12.3M, 4.00K.
std::string format_count(double count);

} // namespace sim::core
