#include "hardware/kernel_tables.hpp"

#include "hardware/compute_model.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>

namespace sim::hardware {
namespace {

// Width of the interpolation kernel, in octaves of each dimension: a measured row half an octave away from the
// query weighs e^-2 as much as one at the nearest measured distance. Narrow, because GEMM rates jump at tile
// boundaries and the tables are dense along the token dimension.
constexpr double octaves = 0.25;

struct Weighted {
  double sum = 0;
  double weight = 0;
};

// Gaussian weights around the nearest rows: exp(-(d^2 - d_min^2) / (2 octaves^2)). Far from every row this is the
// mean of the nearest ones (the table's edge), close to one it is that row.
template <class Rows, class Distance, class Value>
double interpolate(const Rows& rows, Distance distance2, Value value)
{
  double nearest = std::numeric_limits<double>::infinity();
  for (const auto& r : rows)
    nearest = std::min(nearest, distance2(r));
  Weighted w;
  for (const auto& r : rows) {
    const double weight = std::exp(-(distance2(r) - nearest) / (2.0 * octaves * octaves));
    w.sum += weight * value(r);
    w.weight += weight;
  }
  return w.sum / w.weight;
}

double square(double x)
{
  return x * x;
}

} // namespace

double KernelTables::gemm_prior(double m, double n, double batch) const
{
  return gemm_best * wave_efficiency(m, n, batch, sms);
}

void KernelTables::prepare() const
{
  if (!points_.empty() || gemm.empty())
    return;
  points_.reserve(gemm.size());
  for (const auto& s : gemm)
    points_.push_back(Point{{std::log2(s.m), std::log2(s.n), std::log2(s.k), std::log2(s.batch)},
                            gemm_prior(s.m, s.n, s.batch) / s.rate});
  for (const auto& s : fp8_gemm)
    fp8_points_.push_back(Point{{std::log2(s.m), std::log2(s.n), std::log2(s.k), std::log2(s.batch)}, s.speedup});
}

namespace {
// The value of `points` at shape `key` (m, n, k, batch), interpolated around the nearest.
template <class Points>
double at_shape(const Points& points, const std::array<double, 4>& key)
{
  const double q[4] = {std::log2(key[0]), std::log2(key[1]), std::log2(key[2]), std::log2(key[3])};
  return interpolate(
      points,
      [&q](const auto& p) {
        return square(p.x[0] - q[0]) + square(p.x[1] - q[1]) + square(p.x[2] - q[2]) + square(p.x[3] - q[3]);
      },
      [](const auto& p) { return p.correction; });
}
} // namespace

double KernelTables::gemm_rate(double m, double n, double k, double batch) const
{
  const std::array<double, 4> key{m, n, k, batch};
  if (const auto it = cache_.find(key); it != cache_.end())
    return it->second;
  prepare();
  const double rate = std::min(gemm_prior(m, n, batch) / at_shape(points_, key), gemm_best);
  cache_.emplace(key, rate);
  return rate;
}

std::optional<double> KernelTables::fp8_speedup(double m, double n, double k, double batch) const
{
  if (fp8_gemm.empty())
    return std::nullopt;
  const std::array<double, 4> key{m, n, k, batch};
  if (const auto it = fp8_cache_.find(key); it != fp8_cache_.end())
    return it->second;
  prepare();
  const double speedup = at_shape(fp8_points_, key);
  fp8_cache_.emplace(key, speedup);
  return speedup;
}

double KernelTables::attention_occupancy_fraction(const AttentionKernel& kernel) const
{
  const AttentionImpl impl = kernel.impl;
  const double seq = kernel.seq;
  const double heads = kernel.heads;
  if (heads <= 0 || sms <= 0)
    return 1.0;
  const AttentionPass pass = kernel.pass == KernelPass::BACKWARD ? AttentionPass::BACKWARD : AttentionPass::FORWARD;
  std::map<double, double> curve; // waves -> fraction
  for (AttentionImpl which : {impl, AttentionImpl::FLASH2}) {
    for (const auto& o : attention_occupancy)
      if (o.impl == which && o.pass == pass)
        curve[o.waves] = o.fraction;
    if (!curve.empty())
      break;
  }
  if (curve.empty())
    return 1.0;
  const double waves = heads * std::ceil(seq / 128.0) / sms;
  const auto hi = curve.lower_bound(waves);
  if (hi == curve.begin())
    return hi->second;
  if (hi == curve.end())
    return 1.0;
  const auto lo = std::prev(hi);
  const double f = (std::log2(waves) - std::log2(lo->first)) / (std::log2(hi->first) - std::log2(lo->first));
  return lo->second + f * (hi->second - lo->second);
}

std::optional<double> KernelTables::attention_rate(const AttentionKernel& kernel) const
{
  const AttentionImpl impl = kernel.impl;
  const bool causal = kernel.causal;
  const double seq = kernel.seq;
  const double head_dim = kernel.head_dim;
  std::vector<const AttentionSample*> rows;
  for (AttentionPass pass : {kernel.pass == KernelPass::BACKWARD ? AttentionPass::BACKWARD : AttentionPass::FORWARD,
                             AttentionPass::FORWARD_BACKWARD})
    for (bool same_causality : {true, false}) {
      if (!rows.empty())
        break;
      for (const auto& a : attention)
        if (a.impl == impl && a.pass == pass && (a.causal == causal) == same_causality)
          rows.push_back(&a);
    }
  if (rows.empty())
    return std::nullopt;
  // The published curves are grids: sequence lengths for a few head sizes. Piecewise linear in log2 of both, each
  // held constant beyond its measured range.
  std::map<double, std::map<double, double>> curves; // head size -> sequence length -> rate
  for (const auto* a : rows)
    curves[a->head_dim][a->seq] = a->rate;
  const auto along = [](const std::map<double, double>& curve, double x) {
    const auto hi = curve.lower_bound(x);
    if (hi == curve.begin())
      return hi->second;
    if (hi == curve.end())
      return std::prev(hi)->second;
    const auto lo = std::prev(hi);
    const double f = (std::log2(x) - std::log2(lo->first)) / (std::log2(hi->first) - std::log2(lo->first));
    return lo->second + f * (hi->second - lo->second);
  };
  std::map<double, double> by_head;
  for (const auto& [d, curve] : curves)
    by_head[d] = along(curve, seq);
  return along(by_head, head_dim) * attention_occupancy_fraction(kernel);
}

namespace {

// Reads a table's rows after checking its column names: `read` takes each row, whose length is checked. Returns the
// rows' node.
template <class Read>
core::Node read_rows(core::ObjectReader& table, const std::vector<std::string>& columns, Read read)
{
  const core::Node node = table.at("columns", "the list of column names");
  std::vector<std::string> found;
  for (std::size_t i = 0; i < node.array_size(); ++i)
    found.push_back(node.element(i).as_string());
  std::string names;
  for (const auto& c : columns)
    names += (names.empty() ? "" : ", ") + c;
  if (found != columns) {
    std::string expected;
    for (const auto& c : columns)
      expected += (expected.empty() ? "[\"" : "\", \"") + c;
    node.fail("unexpected columns", expected + "\"]");
  }
  core::Node rows = table.at("rows", "an array of rows");
  for (std::size_t i = 0; i < rows.array_size(); ++i) {
    const core::Node row = rows.element(i);
    if (row.array_size() != columns.size())
      row.fail("wrong length", "[" + names + "]");
    read(row);
  }
  return rows;
}

std::string row_source(const core::Node& cell, const std::map<std::string, std::string>& sources)
{
  std::string key = cell.as_string();
  if (!sources.contains(key))
    cell.fail("names no source", "a key of /sources");
  return key;
}

// The first five cells of a GEMM row: m, n, k, batch and layout.
template <class Sample>
void read_shape(const core::Node& row, Sample& s)
{
  s.m = static_cast<double>(row.element(0).as_integer(1, 1 << 24));
  s.n = static_cast<double>(row.element(1).as_integer(1, 1 << 24));
  s.k = static_cast<double>(row.element(2).as_integer(1, 1 << 24));
  s.batch = static_cast<double>(row.element(3).as_integer(1, 1 << 20));
  s.layout = row.element(4).as_choice<GemmLayout>(gemm_layout_choices);
}

} // namespace

std::shared_ptr<const KernelTables> read_kernel_tables(const core::Node& node)
{
  core::ObjectReader r(node);
  core::expect_schema(r, "kernels/v1");
  auto t = std::make_shared<KernelTables>();
  t->name = r.text("name");
  t->description = r.text_or("description", "");
  t->sms = static_cast<int>(r.integer("sms", 1, 1024));

  core::ObjectReader sources(r.at("sources", "an object: source key -> where the numbers come from"));
  for (const auto& item : sources.node().json().items())
    t->sources[item.key()] = sources.node().element_of(item.key()).as_string();

  core::ObjectReader gemm(r.at("gemm", "an object with the measured GEMM rows"));
  t->gemm_best = gemm.quantity("best", core::Dimension::FLOP_RATE);
  gemm.allow({"about"});
  const core::Node gemm_rows =
      read_rows(gemm, {"m", "n", "k", "batch", "layout", "rate", "source"}, [&](const core::Node& row) {
        GemmSample s;
        read_shape(row, s);
        s.rate = row.element(5).as_quantity(core::Dimension::FLOP_RATE);
        s.source = row_source(row.element(6), t->sources);
        if (s.rate > t->gemm_best * 1.0001)
          row.element(5).fail("above the table's best rate",
                              fmt::format("at most {}", gemm.node().json()["best"].dump()));
        t->gemm.push_back(std::move(s));
      });
  if (t->gemm.empty())
    gemm_rows.fail("no rows", "at least one measured GEMM");
  gemm.finish();

  if (auto fp8_node = r.find("fp8_gemm")) {
    core::ObjectReader fp8(*fp8_node);
    fp8.allow({"about"});
    read_rows(fp8, {"m", "n", "k", "batch", "layout", "speedup", "source"}, [&](const core::Node& row) {
      Fp8GemmSample s;
      read_shape(row, s);
      s.speedup = row.element(5).as_number(0.5, 4.0);
      s.source = row_source(row.element(6), t->sources);
      t->fp8_gemm.push_back(std::move(s));
    });
    fp8.finish();
  }

  if (auto attention_node = r.find("attention")) {
    core::ObjectReader attention(*attention_node);
    attention.allow({"about"});
    read_rows(attention, {"impl", "direction", "causal", "head_dim", "seq", "rate", "source"},
              [&](const core::Node& row) {
                AttentionSample a;
                a.impl = row.element(0).as_choice<AttentionImpl>(attention_impl_choices);
                a.pass = row.element(1).as_choice<AttentionPass>(attention_pass_choices);
                a.causal = row.element(2).as_bool();
                a.head_dim = static_cast<double>(row.element(3).as_integer(8, 1024));
                a.seq = static_cast<double>(row.element(4).as_integer(16, 1 << 24));
                a.rate = row.element(5).as_quantity(core::Dimension::FLOP_RATE);
                a.source = row_source(row.element(6), t->sources);
                t->attention.push_back(std::move(a));
              });
    if (auto occupancy_node = attention.find("occupancy")) {
      core::ObjectReader occupancy(*occupancy_node);
      occupancy.allow({"about"});
      read_rows(occupancy, {"impl", "direction", "waves", "fraction", "source"}, [&](const core::Node& row) {
        OccupancySample o;
        o.impl = row.element(0).as_choice<AttentionImpl>(attention_impl_choices);
        o.pass = row.element(1).as_choice<AttentionPass>(attention_pass_choices);
        if (o.pass == AttentionPass::FORWARD_BACKWARD)
          row.element(1).fail("not a single pass", "fwd or bwd");
        o.waves = row.element(2).as_number(0.01, 1e4);
        o.fraction = row.element(3).as_number(0.01, 1.0);
        o.source = row_source(row.element(4), t->sources);
        t->attention_occupancy.push_back(std::move(o));
      });
      occupancy.finish();
    }
    attention.finish();
  }
  r.finish();
  return t;
}

bool KernelTables::operator==(const KernelTables& o) const
{
  return sms == o.sms && gemm_best == o.gemm_best && gemm == o.gemm && fp8_gemm == o.fp8_gemm &&
         attention == o.attention && attention_occupancy == o.attention_occupancy;
}

} // namespace sim::hardware
