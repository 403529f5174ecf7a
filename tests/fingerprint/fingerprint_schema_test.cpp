// Produced fingerprints validate against docs/fingerprint.schema.json. The validator
// below implements the subset of JSON Schema (2020-12) the schema uses and fails on any
// other keyword, so the schema cannot silently say more than is checked.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "fingerprint/fingerprint_test_util.h"

namespace detinfer {
namespace {

using nlohmann::json;

class SchemaValidator {
 public:
  explicit SchemaValidator(json root) : root_(std::move(root)) {}

  // Appends one message per violation to `errors`.
  void validate(const json& v, const json& s, const std::string& path,
                std::vector<std::string>& errors) const {
    static const std::set<std::string> kKnown = {
        "$schema", "$id",     "title",   "description", "$defs",    "$ref",
        "type",    "const",   "enum",    "properties",  "required", "additionalProperties",
        "items",   "pattern", "minimum", "maximum"};
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (kKnown.count(it.key()) == 0) errors.push_back("schema uses unsupported " + it.key());
    }
    if (s.contains("$ref")) {
      const std::string ref = s["$ref"];
      const std::string prefix = "#/$defs/";
      if (ref.rfind(prefix, 0) != 0 || !root_["$defs"].contains(ref.substr(prefix.size()))) {
        errors.push_back("bad $ref " + ref);
        return;
      }
      validate(v, root_["$defs"][ref.substr(prefix.size())], path, errors);
    }
    if (s.contains("type")) {
      const json types = s["type"].is_array() ? s["type"] : json::array({s["type"]});
      bool ok = false;
      for (const auto& t : types) ok = ok || has_type(v, t.get<std::string>());
      if (!ok) {
        errors.push_back(path + ": type " + v.type_name() + " not in " + types.dump());
        return;
      }
    }
    if (s.contains("const") && v != s["const"]) errors.push_back(path + ": != const");
    if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end()) {
      errors.push_back(path + ": " + v.dump() + " not in enum");
    }
    if (v.is_number()) {
      if (s.contains("minimum") && v.get<double>() < s["minimum"].get<double>()) {
        errors.push_back(path + ": below minimum");
      }
      if (s.contains("maximum") && v.get<double>() > s["maximum"].get<double>()) {
        errors.push_back(path + ": above maximum");
      }
    }
    if (v.is_string() && s.contains("pattern")) {
      const std::regex re(s["pattern"].get<std::string>());
      if (!std::regex_search(v.get<std::string>(), re)) {
        errors.push_back(path + ": '" + v.get<std::string>().substr(0, 40) + "' !~ pattern");
      }
    }
    if (v.is_array() && s.contains("items")) {
      for (std::size_t i = 0; i < v.size(); ++i) {
        validate(v[i], s["items"], path + "[" + std::to_string(i) + "]", errors);
      }
    }
    if (v.is_object()) {
      if (s.contains("required")) {
        for (const auto& r : s["required"]) {
          if (!v.contains(r.get<std::string>()))
            errors.push_back(path + "." + r.get<std::string>() + " missing");
        }
      }
      for (auto it = v.begin(); it != v.end(); ++it) {
        const std::string p = path + "." + it.key();
        if (s.contains("properties") && s["properties"].contains(it.key())) {
          validate(it.value(), s["properties"][it.key()], p, errors);
        } else if (s.contains("additionalProperties")) {
          const json& ap = s["additionalProperties"];
          if (ap.is_boolean()) {
            if (!ap.get<bool>()) errors.push_back(p + ": additional property");
          } else {
            validate(it.value(), ap, p, errors);
          }
        }
      }
    }
  }

  std::vector<std::string> validate(const json& v) const {
    std::vector<std::string> errors;
    validate(v, root_, "", errors);
    return errors;
  }

 private:
  static bool has_type(const json& v, const std::string& t) {
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    if (t == "string") return v.is_string();
    if (t == "boolean") return v.is_boolean();
    if (t == "null") return v.is_null();
    if (t == "number") return v.is_number();
    if (t == "integer") return v.is_number_integer();
    ADD_FAILURE() << "unknown type " << t;
    return false;
  }
  json root_;
};

SchemaValidator load_schema() {
  std::ifstream in(std::string(DETINFER_SOURCE_DIR) + "/docs/fingerprint.schema.json");
  EXPECT_TRUE(in.good());
  return SchemaValidator(json::parse(in));
}

std::string joined(const std::vector<std::string>& errors) {
  std::string out;
  for (const auto& e : errors) out += e + "\n";
  return out;
}

TEST(FingerprintSchema, ProducedFingerprintsValidate) {
  const SchemaValidator schema = load_schema();
  for (RecordLevel level : {RecordLevel::kFinal, RecordLevel::kSteps, RecordLevel::kLogits}) {
    for (std::uint64_t seed : {1, 2, 3}) {
      RunFingerprint fp = testing::at_level(testing::make_fingerprint(seed), level);
      if (seed == 2) {
        fp.device.gpu = FingerprintGpu{"GPU", "9.0", "550"};
        fp.request.config.stop_token_ids.reset();
        fp.set_prompt({1, 2}, false);
      }
      if (seed == 3) fp.sequences.clear();
      const auto errors = schema.validate(json::parse(fp.to_json()));
      EXPECT_TRUE(errors.empty()) << to_string(level) << " seed " << seed << "\n" << joined(errors);
    }
  }
  RunFingerprint host;
  set_host_groups(host);
  const auto errors = schema.validate(json::parse(host.to_json()));
  EXPECT_TRUE(errors.empty()) << joined(errors);
}

TEST(FingerprintSchema, SchemaRejectsWhatTheParserRejects) {
  const SchemaValidator schema = load_schema();
  const json good = json::parse(testing::make_fingerprint(1).to_json());
  auto rejected = [&](const std::function<void(json&)>& f) {
    json j = good;
    f(j);
    return !schema.validate(j).empty();
  };
  EXPECT_TRUE(rejected([](json& j) { j["schema"] = "detinfer.fingerprint/2"; }));
  EXPECT_TRUE(rejected([](json& j) { j["extra"] = true; }));
  EXPECT_TRUE(rejected([](json& j) { j["request"]["config"]["extra"] = true; }));
  EXPECT_TRUE(rejected([](json& j) { j["request"].erase("seed"); }));
  EXPECT_TRUE(rejected([](json& j) { j["request"]["seed"] = "01"; }));
  EXPECT_TRUE(rejected([](json& j) { j["numerics"]["threads"] = 0; }));
  EXPECT_TRUE(rejected([](json& j) { j["model"]["fingerprint"] = "ABC"; }));
  EXPECT_TRUE(rejected([](json& j) { j["output"]["sequences"][0]["tokens"][0] = -5; }));
  EXPECT_TRUE(rejected([](json& j) { j["output"]["sequences"][0]["logits"][0] = "a=bc"; }));
  EXPECT_TRUE(rejected([](json& j) { j["environment"]["env_vars"]["X"] = 1; }));
}

}  // namespace
}  // namespace detinfer
