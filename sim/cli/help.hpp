// `simtrain help [TOPIC]`: the repository's documentation, built into the binary, printed as text.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace sim::cli {

// A Markdown file of the repository as it was when simtrain was built (sim/cli/embed_documents.cmake generates the
// table). Its text comes in pieces, each short enough for a compiler to take as one literal.
struct EmbeddedDocument {
  std::string_view path; // from the repository's root, e.g. "scenarios/README.md"
  std::span<const std::string_view> parts;
};

std::span<const EmbeddedDocument> embedded_documents();

// With no topic, the topics, one line each; with one, its document or section as text (HTML comments, which hold
// the test markers, removed). Throws core::InputError for an unknown topic, naming the closest one.
std::string help_text(std::string_view topic);

// Prints help_text(topic); returns the exit code.
int help(const std::string& topic);

} // namespace sim::cli
