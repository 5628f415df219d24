#include "core/json_reader.hpp"

#include "support.hpp"

using sim::core::Json;
using sim::core::Node;
using sim::core::ObjectReader;
using sim::core::Provenance;

namespace {

enum class Colour { RED, GREEN };
constexpr std::array<sim::core::Choice<Colour>, 2> colours{{{"red", Colour::RED}, {"green", Colour::GREEN}}};

Provenance in_file(const std::string& file)
{
  Provenance p;
  p.add_source("", file);
  return p;
}

} // namespace

TEST_CASE("an unknown key is an error naming the file, the pointer and the closest known key")
{
  const Json doc = Json::parse(R"({"plan": {"tp": 2, "micro_bacth": 4}})");
  const Provenance prov = in_file("x.json");
  const auto message = test::error_of([&] {
    ObjectReader plan(Node(doc.at("plan"), "/plan", prov));
    plan.integer_or("tp", 1);
    plan.integer_or("micro_batch", 1);
    plan.finish();
  });
  CHECK(message == R"(x.json:/plan/micro_bacth: unknown key; did you mean "micro_batch"? (found "micro_bacth"; )"
                   R"(expected one of micro_batch, tp))");
}

TEST_CASE("a value of the wrong type says what was found and what was expected")
{
  const Json doc = Json::parse(R"({"tp": "4", "ratio": true, "bw": 300})");
  const Provenance prov = in_file("x.json");
  ObjectReader r(Node(doc, "", prov));
  CHECK(test::error_of([&] { r.integer("tp"); }) ==
        R"(x.json:/tp: wrong type (found a string "4"; expected an integer >= 1))");
  CHECK(test::error_of([&] { r.number("ratio", 0, 1); }) ==
        "x.json:/ratio: wrong type (found a boolean true; expected a number from 0 to 1)");
  CHECK(test::error_of([&] { r.quantity("bw", sim::core::Dimension::BANDWIDTH); }) ==
        R"(x.json:/bw: a bare number has no unit (found 300; expected a bandwidth such as "450GBps" or "400Gbps"))");
}

TEST_CASE("integers are range checked and integral floats are accepted")
{
  const Json doc = Json::parse(R"({"a": 0, "b": 1e3, "c": 2.5})");
  const Provenance prov = in_file("x.json");
  ObjectReader r(Node(doc, "", prov));
  CHECK(test::error_of([&] { r.integer("a"); }) == "x.json:/a: out of range (found 0; expected an integer >= 1)");
  CHECK(r.integer("b") == 1000);
  CHECK(test::error_of([&] { r.integer("c"); }) == "x.json:/c: not an integer (found 2.5; expected an integer >= 1)");
}

TEST_CASE("a missing required key is reported at its would-be pointer")
{
  const Json doc = Json::parse(R"({"plan": {}})");
  const Provenance prov = in_file("x.json");
  ObjectReader plan(Node(doc.at("plan"), "/plan", prov));
  CHECK(test::error_of([&] { plan.integer("global_batch"); }) ==
        "x.json:/plan/global_batch: missing required key (found nothing; expected an integer >= 1)");
}

TEST_CASE("enumerations list their allowed values and suggest the closest")
{
  const Json doc = Json::parse(R"({"colour": "gren", "other": 3})");
  const Provenance prov = in_file("x.json");
  ObjectReader r(Node(doc, "", prov));
  CHECK(test::error_of([&] { r.choice<Colour>("colour", colours); }) ==
        R"(x.json:/colour: unknown value (found "gren"; expected one of red, green; did you mean "green"?))");
  CHECK(test::error_of([&] { r.choice<Colour>("other", colours); }) ==
        "x.json:/other: wrong type (found a number 3; expected one of red, green)");
}

TEST_CASE("provenance maps a composed tree back to files and marks --set values")
{
  Provenance p;
  p.add_source("", "scenarios/a.json");
  p.add_source("/model", "models/m.json");
  p.add_source("/model/num_layers", "hf/config.json", "/num_hidden_layers");
  p.mark_set("/plan/tp", "plan.tp=3");
  CHECK(p.locate("/plan/pp").file == "scenarios/a.json");
  CHECK(p.locate("/model/hidden_size").file == "models/m.json");
  CHECK(p.locate("/model/hidden_size").pointer == "/hidden_size");
  CHECK(p.locate("/model/num_layers").pointer == "/num_hidden_layers");
  CHECK(p.locate("/plan/tp").set_by == "plan.tp=3");
  CHECK(p.locate("/plan/tpx").set_by.empty());
}

TEST_CASE("JSON files with syntax errors or duplicate keys are rejected with a position")
{
  const auto dir = test::scratch_dir();
  const auto broken = test::write_text(dir / "broken.json", "{\n  \"a\": 1,\n  \"b\": \n}\n");
  CHECK_THAT(test::error_of([&] { sim::core::read_json_file(broken); }),
             Catch::StartsWith(sim::core::display_path(broken) + ":4:1: invalid JSON"));
  const auto dup = test::write_text(dir / "dup.json", R"({"plan": {"tp": 1, "tp": 2}})");
  CHECK(test::error_of([&] { sim::core::read_json_file(dup); }) ==
        sim::core::display_path(dup) + R"(:/plan/tp: duplicate key (found "tp"; expected each key once per object))");
  CHECK(test::error_of([&] { sim::core::read_json_file(dir / "absent.json"); }) ==
        sim::core::display_path(dir / "absent.json") + ": cannot read file (found no such file; expected a JSON file)");
}
