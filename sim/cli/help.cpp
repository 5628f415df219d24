#include "cli/help.hpp"

#include "core/input_error.hpp"
#include "core/spelling.hpp"

#include <algorithm>
#include <array>
#include <fmt/format.h>
#include <iostream>
#include <stdexcept>
#include <vector>

namespace sim::cli {
namespace {

// A topic is a whole document, or one section of it (from its heading to the next heading of the same level or
// above).
struct Topic {
  std::string_view name;
  std::string_view document;
  std::string_view heading; // the heading line, or empty for the whole document
  std::string_view summary;
};

constexpr std::array topics{
    Topic{"readme", "README.md", "", "what simtrain is, the three jobs as recipes, the map of the repository"},
    Topic{"commands", "sim/cli/README.md", "", "every command and option, error messages, infeasible plans"},
    Topic{"architecture", "sim/README.md", "", "data flow, layers, modules, where to add things"},
    Topic{"scenario", "scenarios/README.md", "", "scenario/v1: units, references, --set, every key; the scenarios"},
    Topic{"plan", "scenarios/README.md", "### plan", "the parallel plan's keys and their defaults"},
    Topic{"software", "scenarios/README.md", "### Software generations",
          "what each plan.software generation sets, from its code history"},
    Topic{"model", "models/README.md", "", "model/v1, HuggingFace config.json; the model presets"},
    Topic{"topology", "topologies/README.md", "", "topology/v1, how a cluster is simulated; the cluster presets"},
    Topic{"gpu", "topologies/README.md", "## gpus/ — the GPU catalogue (`gpu/v1`)", "gpu/v1 and the GPU catalogue"},
    Topic{"kernel-tables", "topologies/README.md", "## kernels/v1: measured kernel tables (`gpus/kernels/`)",
          "kernels/v1: the measured GEMM and attention tables"},
    Topic{"compute", "sim/hardware/README.md", "", "how a kernel is costed"},
    Topic{"workload", "sim/workload/README.md", "",
          "how a step becomes tasks: schedules, MoE, FP8, context parallelism, collectives, folding"},
    Topic{"engine", "sim/engine/README.md", "", "the replay on SimGrid, and its speed"},
    Topic{"report", "sim/report/README.md", "", "report.json and every metric's formula, traces, memory, cost"},
    Topic{"memory", "sim/report/README.md", "## Output: memory and FLOPs",
          "simtrain memory: each part and its formula"},
    Topic{"cost", "sim/report/README.md", "## Cost and time to train", "the price of a run, time and cost to train"},
    Topic{"compare", "sim/study/README.md", "## Two runs side by side", "simtrain compare"},
    Topic{"sweep", "sim/study/README.md", "## Layout search", "simtrain sweep and merge: layouts ranked"},
    Topic{"import", "sim/importer/README.md", "", "simtrain import: Megatron-LM, NeMo, DeepSpeed, torchtitan"},
    Topic{"validation", "sim/validation/README.md", "", "simtrain validate: published runs, the error tables"},
    Topic{"whatif", "scenarios/whatif/README.md", "",
          "export caps, MoE, FP8, stragglers, mixed clusters, equal budget, fabrics"},
    Topic{"teaching", "scenarios/teaching/README.md", "", "why pipelines have bubbles: schedules against formulas"},
    Topic{"tests", "tests/README.md", "", "test tiers and labels, goldens, the bad-input corpus, fuzzing"},
    Topic{"tools", "tools/README.md", "", "the scripts in tools/"},
};

std::string document_text(std::string_view path)
{
  for (const auto& d : embedded_documents())
    if (d.path == path) {
      std::string text;
      for (const auto part : d.parts)
        text += part;
      return text;
    }
  throw std::logic_error(fmt::format("help: {} is not built into simtrain", path));
}

std::vector<std::string> lines_of(const std::string& text)
{
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    const auto end = text.find('\n', start);
    lines.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    start = end == std::string::npos ? text.size() : end + 1;
  }
  return lines;
}

// The heading level of a Markdown line (0: not a heading).
std::size_t heading_level(const std::string& line)
{
  const auto hashes = line.find_first_not_of('#');
  return hashes != 0 && hashes != std::string::npos && line[hashes] == ' ' ? hashes : 0;
}

// Follows a document line by line: whether each line belongs to a fenced code block (its fences included).
class Fences {
 public:
  bool is_code(const std::string& line)
  {
    const auto ticks = std::min(line.find_first_not_of('`'), line.size());
    if (open_ == 0 && ticks >= 3) {
      open_ = ticks;
      return true;
    }
    if (open_ != 0 && ticks >= open_ && line.find_first_not_of('`', ticks) == std::string::npos) {
      open_ = 0;
      return true;
    }
    return open_ != 0;
  }

 private:
  std::size_t open_ = 0; // the backticks that opened the block we are in, or 0
};

// From `heading` to the next heading of its level or above, outside fenced code (where # starts a shell comment).
std::string section(const std::string& text, std::string_view heading, std::string_view document)
{
  const auto lines = lines_of(text);
  std::string out;
  std::size_t level = 0;
  Fences fences;
  for (const auto& line : lines) {
    const auto this_level = fences.is_code(line) ? 0 : heading_level(line);
    if (level == 0) {
      if (line == heading)
        level = this_level;
      else
        continue;
    } else if (this_level != 0 && this_level <= level) {
      break;
    }
    out += line + "\n";
  }
  if (level == 0)
    throw std::logic_error(fmt::format("help: {} has no heading \"{}\"", document, heading));
  return out;
}

// The text without HTML comments (the markers of tests and tools); a line that held only comments goes too, and a
// blank line after it where one came before it (a marker between two paragraphs leaves one blank line). Fenced code
// and code spans (which may run over a line break inside a paragraph) are left as they are: they show what a marker
// looks like.
std::string without_comments(const std::string& text)
{
  std::string out;
  Fences fences;
  bool in_comment = false;
  bool in_span = false;
  bool after_dropped_line = false; // the last line was a comment alone, dropped after a blank line
  for (const auto& line : lines_of(text)) {
    if (!in_comment && fences.is_code(line)) {
      out += line + "\n";
      after_dropped_line = false;
      continue;
    }
    const bool blank = line.find_first_not_of(" \t") == std::string::npos;
    if (blank && after_dropped_line) {
      after_dropped_line = false;
      continue;
    }
    after_dropped_line = false;
    if (blank)
      in_span = false; // a blank line ends a paragraph, and any span left open in it
    std::string kept;
    bool had_comment = false;
    for (std::size_t at = 0; at < line.size();) {
      if (in_comment) {
        const auto close = line.find("-->", at);
        in_comment = close == std::string::npos;
        at = in_comment ? line.size() : close + 3;
      } else if (!in_span && line.compare(at, 4, "<!--") == 0) {
        had_comment = in_comment = true;
        at += 4;
      } else {
        in_span = line[at] == '`' ? !in_span : in_span;
        kept += line[at++];
      }
    }
    if (!had_comment || kept.find_first_not_of(" \t") != std::string::npos)
      out += kept + "\n";
    else
      after_dropped_line = out.empty() || out.ends_with("\n\n");
  }
  return out;
}

} // namespace

std::string help_text(std::string_view topic)
{
  if (topic.empty()) {
    std::size_t width = 0;
    for (const auto& t : topics)
      width = std::max(width, t.name.size());
    std::string out = "simtrain help TOPIC prints one of these (the same text as the repository's README files):\n";
    for (const auto& t : topics)
      out += fmt::format("  {:<{}}  {}\n", t.name, width, t.summary);
    return out;
  }
  for (const auto& t : topics)
    if (t.name == topic) {
      const std::string text = document_text(t.document);
      return without_comments(t.heading.empty() ? text : section(text, t.heading, t.document));
    }
  std::vector<std::string> names;
  for (const auto& t : topics)
    names.emplace_back(t.name);
  std::string problem = "unknown topic";
  if (const auto match = core::closest_match(topic, names))
    problem += "; did you mean \"" + *match + "\"?";
  throw core::InputError(core::Location{"help", "", ""}, problem, "\"" + std::string(topic) + "\"",
                         "one of " + core::join(names));
}

int help(const std::string& topic)
{
  std::cout << help_text(topic);
  return 0;
}

} // namespace sim::cli
