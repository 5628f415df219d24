#include "validation/case_hardware.hpp"

#include "scenario/document_tree.hpp"

#include <fmt/format.h>
#include <regex>

namespace sim::validation {

using core::Json;

const std::set<std::string>& hardware_fields()
{
  static const std::set<std::string> fields{"gpu", "num_gpus", "gpus_per_node", "interconnect"};
  return fields;
}

std::optional<Hardware> match_gpu(const std::string& name)
{
  const std::string n = lower(name);
  const bool has_40gb = std::regex_search(n, std::regex(R"((^|[^0-9])40 ?gb)"));
  // PCIe and NVL cards of parts the catalogue holds as SXM modules (no NVSwitch, other clocks and power: no node
  // preset has them), and the 16 GB V100: none, rather than the SXM part's numbers.
  const bool card = mentions(n, "pcie") || std::regex_search(n, std::regex(R"(\bnvl\b|nvl ?[0-9]*$)"));
  if (card &&
      (mentions(n, "a100") || mentions(n, "a800") || mentions(n, "h100") || mentions(n, "h800") || mentions(n, "h200")))
    return std::nullopt;
  if (mentions(n, "v100") && std::regex_search(n, std::regex(R"((^|[^0-9])16 ?gb)")))
    return std::nullopt;
  if (mentions(n, "a100"))
    return Hardware{has_40gb ? "a100-sxm4-40gb" : "a100-sxm4-80gb", "dgx-a100"};
  if (mentions(n, "a800"))
    return Hardware{"a800-sxm4-80gb", "hgx-a800"};
  if (mentions(n, "gb200"))
    return Hardware{"gb200", "gb200-nvl72"};
  if (mentions(n, "b200"))
    return Hardware{"b200", "hgx-b200"};
  if (mentions(n, "mi325x"))
    return Hardware{"mi325x", "mi325x"};
  if (mentions(n, "mi300x"))
    return Hardware{"mi300x", "mi300x"};
  if (mentions(n, "l40s"))
    return Hardware{"l40s", "l40s-pcie"};
  // Parts the catalogue does not hold under a name that contains one it does: Meta's H100 with 96 GB of HBM2e at
  // 500 W (Grand Teton), GH200.
  if (mentions(n, "gh200") ||
      (mentions(n, "h100") && (mentions(n, "hbm2e") || mentions(n, "96gb") || mentions(n, "96 gb"))))
    return std::nullopt;
  if (mentions(n, "h100"))
    return Hardware{"h100-sxm5-80gb", "dgx-h100"};
  if (mentions(n, "h800"))
    return Hardware{"h800-sxm5-80gb", "hgx-h800"};
  if (mentions(n, "h200"))
    return Hardware{"h200-sxm-141gb", "dgx-h100"};
  if (mentions(n, "h20"))
    return Hardware{"h20", "hgx-h20"};
  // The SXM3 module is the DGX-2's (16 on NVSwitch); the SXM2 the DGX-1's.
  if (mentions(n, "v100"))
    return Hardware{"v100-sxm2-32gb", mentions(n, "sxm3") ? "dgx-2" : "dgx-v100"};
  if (mentions(n, "4090"))
    return Hardware{"rtx-4090", "pcie-4090"};
  if (mentions(n, "3090"))
    return Hardware{"rtx-3090", "workstation-rtx3090"};
  if (mentions(n, "5090"))
    return Hardware{"rtx-5090", "workstation-rtx5090"};
  if (mentions(n, "a6000"))
    return Hardware{"rtx-a6000", "workstation-rtx-a6000"};
  if (mentions(n, "6000 ada") || mentions(n, "6000ada") || mentions(n, "6000-ada"))
    return Hardware{"rtx-6000-ada", "workstation-rtx6000-ada"};
  return std::nullopt;
}

std::optional<Json> convert_topology(Conversion& conv, Hardware hw)
{
  const Json& hardware = section(conv.case_json(), "hardware");
  // Sixteen V100s to a node: a DGX-2.
  if (hw.topology == "dgx-v100" && integer(hardware, "gpus_per_node") == 16)
    hw.topology = "dgx-2";
  const auto path = scenario::preset_path(conv.data_dir(), scenario::ReferenceKind::TOPOLOGY, hw.topology);
  Json topology = core::read_json_file(path);
  bool changed = false;
  if (topology["node"]["gpu"] != hw.gpu) {
    topology["node"]["gpu"] = hw.gpu;
    changed = true;
  }
  const auto per_node = integer(hardware, "gpus_per_node");
  if (per_node && *per_node != topology["node"]["gpus"].get<std::int64_t>()) {
    conv.refuse(fmt::format("{} GPUs per node: no such node among the topology presets", *per_node));
    return std::nullopt;
  }
  const std::int64_t node_gpus = topology["node"]["gpus"].get<std::int64_t>();
  if (const auto gpus = integer(hardware, "num_gpus"); gpus && *gpus > node_gpus && *gpus % node_gpus != 0) {
    conv.refuse(fmt::format("{} GPUs do not fill whole {}-GPU nodes of {}, and the source does not say how they are "
                            "placed",
                            *gpus, node_gpus, hw.topology));
    return std::nullopt;
  }
  const std::string link = lower(text(hardware, "interconnect"));
  std::smatch total;
  if (std::regex_search(link, total, std::regex(R"(([0-9]+(\.[0-9]+)?) ?gbps node)"))) {
    const double per_nic = std::stod(total[1].str()) / topology["node"]["nics"]["count"].get<double>();
    topology["node"]["nics"]["bandwidth"] = fmt::format("{}Gbps", per_nic);
    if (mentions(link, "roce"))
      topology["node"]["nics"]["kind"] = "ethernet";
    changed = true;
  } else if (std::smatch nics; std::regex_search(
                 link, nics, std::regex(R"(([0-9]+) ?x? ?(([0-9.]+) ?gb(/s|ps) )?([a-z-]+ )?(links|hcas|nics)\b)"))) {
    // "4 OmniPath links", "2x 200 Gb/s HCAs": the node's NIC count, at the stated rate, or Omni-Path's 100 Gb/s
    // (Intel Omni-Path 100 Series), or the preset's.
    const std::int64_t count = std::stoll(nics[1].str());
    std::string rate = topology["node"]["nics"]["bandwidth"].get<std::string>();
    if (nics[3].matched)
      rate = fmt::format("{}Gbps", nics[3].str());
    else if (mentions(link, "omni"))
      rate = "100Gbps";
    if (count > 0 && (count != topology["node"]["nics"]["count"].get<std::int64_t>() ||
                      rate != topology["node"]["nics"]["bandwidth"].get<std::string>())) {
      topology["node"]["nics"]["count"] = count;
      topology["node"]["nics"]["bandwidth"] = rate;
      conv.assume(fmt::format("{} NICs of {} per node, from the interconnect \"{}\"", count, rate,
                              text(hardware, "interconnect")));
      changed = true;
    }
  } else if (link.empty() || mentions(link, "not stated")) {
    conv.assume(fmt::format("interconnect not stated: the {} preset", hw.topology));
  }
  if (!changed)
    return Json(hw.topology);
  topology["name"] = fmt::format("{} ({})", hw.topology, conv.id());
  return topology;
}

} // namespace sim::validation
