#include "core/spelling.hpp"
#include "core/units.hpp"

#include <catch2/catch.hpp>

using sim::core::Dimension;
using sim::core::parse_quantity;

TEST_CASE("bandwidths accept bytes and bits per second in SimGrid's spellings")
{
  CHECK(*parse_quantity("450GBps", Dimension::BANDWIDTH) == Approx(450e9));
  CHECK(*parse_quantity("400Gbps", Dimension::BANDWIDTH) == Approx(50e9));
  CHECK(*parse_quantity("25 GB/s", Dimension::BANDWIDTH) == Approx(25e9));
  CHECK(*parse_quantity("1GiBps", Dimension::BANDWIDTH) == Approx(1073741824.0));
  CHECK_FALSE(parse_quantity("450GB", Dimension::BANDWIDTH));
  CHECK_FALSE(parse_quantity("fast", Dimension::BANDWIDTH));
}

TEST_CASE("sizes, times and FLOP rates parse to SI units")
{
  CHECK(*parse_quantity("80GiB", Dimension::BYTES) == Approx(80.0 * 1024 * 1024 * 1024));
  CHECK(*parse_quantity("25MB", Dimension::BYTES) == Approx(25e6));
  CHECK(*parse_quantity("2us", Dimension::TIME) == Approx(2e-6));
  CHECK(*parse_quantity("1.5ms", Dimension::TIME) == Approx(1.5e-3));
  CHECK(*parse_quantity("989Tf", Dimension::FLOP_RATE) == Approx(989e12));
  CHECK(*parse_quantity("312TFLOPS", Dimension::FLOP_RATE) == Approx(312e12));
  CHECK(*parse_quantity("1e3f", Dimension::FLOP_RATE) == Approx(1e3));
}

TEST_CASE("a unit of the wrong dimension is rejected")
{
  CHECK_FALSE(parse_quantity("80GiB", Dimension::TIME));
  CHECK_FALSE(parse_quantity("2us", Dimension::BYTES));
  CHECK_FALSE(parse_quantity("450GBps", Dimension::BYTES));
  CHECK_FALSE(parse_quantity("80", Dimension::BYTES));
}

TEST_CASE("quantities print with readable units")
{
  CHECK(sim::core::format_bytes(80.0 * 1024 * 1024 * 1024) == "80.00 GiB");
  CHECK(sim::core::format_bandwidth(450e9) == "450 GB/s");
  CHECK(sim::core::format_time(1.25e-3) == "1.250 ms");
  CHECK(sim::core::format_flop_rate(312e12) == "312 TFLOP/s");
}

TEST_CASE("did-you-mean finds typos and prefixes but not unrelated words")
{
  const std::vector<std::string> keys{"num_layers", "hidden_size", "num_attention_heads", "vocab_size"};
  CHECK(sim::core::closest_match("num_layer", keys) == "num_layers");
  CHECK(sim::core::closest_match("hiden_size", keys) == "hidden_size");
  CHECK(sim::core::closest_match("layers", keys) == "num_layers");
  CHECK_FALSE(sim::core::closest_match("optimizer", keys));
  CHECK(sim::core::edit_distance("1f1b", "1fb1") == 1);
}

TEST_CASE("a plain number is the whole text, finite, without a unit")
{
  CHECK(sim::core::parse_number("128") == 128.0);
  CHECK(sim::core::parse_number("1e-2") == 0.01);
  CHECK(sim::core::parse_number("-0.5") == -0.5);
  CHECK_FALSE(sim::core::parse_number(""));
  CHECK_FALSE(sim::core::parse_number("12GB"));
  CHECK_FALSE(sim::core::parse_number(" 4"));
  CHECK_FALSE(sim::core::parse_number("inf"));
}
