// Issue 27 (SessionOptions field table): the C conversion of dti_session_options iterates
// the table (session/session_fields.h). Every row the C struct carries survives
// C -> C++ -> C with a non-default value, reaching its C++ member on the way; the C
// defaults are the C++ defaults.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <type_traits>

#include "capi/capi_internal.h"
#include "detinfer/c_api.h"
#include "session/session_fields.h"

namespace detinfer {
namespace {

using session::kSessionFields;
using session::SessionFieldSpec;

// A C value other than the default: a bool member (0/1 in C) is toggled, a number grows.
template <typename C, typename Cxx>
void flip(C& c, const Cxx&) {
  if constexpr (std::is_same_v<Cxx, bool>) {
    c = c != 0 ? 0 : 1;
  } else {
    c += 3;
  }
}

struct Row {
  std::function<void(dti_session_options&)> edit;
  // Whether the C++ options differ from the defaults in this row's member.
  std::function<bool(const SessionOptions&)> changed;
  // Whether two C structs agree in this row's member.
  std::function<bool(const dti_session_options&, const dti_session_options&)> same;
};

bool same_string(const char* a, const char* b) {
  return (a == nullptr) == (b == nullptr) && (a == nullptr || std::string(a) == b);
}

// Every row the C struct carries, by config key.
std::map<std::string, Row> rows() {
  std::map<std::string, Row> r;
  const SessionOptions d;
#define DETINFER_TEST_ROW_kCopy(key, c_member, member)                                 \
  r[key] = {[](dti_session_options& c) { flip(c.c_member, SessionOptions{}.member); }, \
            [d](const SessionOptions& s) { return !(s.member == d.member); },          \
            [](const dti_session_options& a, const dti_session_options& b) {           \
              return a.c_member == b.c_member;                                         \
            }};
#define DETINFER_TEST_ROW_kCustom(key, c_member, member)
#define DETINFER_TEST_ROW_kNone(key, c_member, member)
#define DETINFER_TEST_ROW(member, key, flag, how, c_member, ...) \
  DETINFER_TEST_ROW_##how(key, c_member, member)
  DETINFER_SESSION_FIELDS(DETINFER_TEST_ROW)
#undef DETINFER_TEST_ROW
  auto same_int = [](auto field) {
    return [field](const dti_session_options& a, const dti_session_options& b) {
      return a.*field == b.*field;
    };
  };
  r["mode"] = {[](auto& c) { c.mode = DTI_MODE_FAST; },
               [](const SessionOptions& s) { return s.mode == NumericsMode::kFast; },
               same_int(&dti_session_options::mode)};
  r["kv_dtype"] = {[](auto& c) { c.kv_dtype = DTI_KV_BF16; },
                   [](const SessionOptions& s) { return s.kv_dtype == KvDType::kBF16; },
                   same_int(&dti_session_options::kv_dtype)};
  r["log_level"] = {[](auto& c) { c.log_level = 3; },
                    [](const SessionOptions& s) { return s.log_level == LogLevel(3); },
                    same_int(&dti_session_options::log_level)};
  r["fingerprint.level"] = {
      [](auto& c) { c.fingerprint_level = 1; },
      [](const SessionOptions& s) { return s.recorder.level == RecordLevel::kFinal; },
      same_int(&dti_session_options::fingerprint_level)};
  r["cache_salt"] = {
      [](auto& c) { c.cache_salt = "salt"; },
      [](const SessionOptions& s) { return s.cache_salt == "salt"; },
      [](const auto& a, const auto& b) { return same_string(a.cache_salt, b.cache_salt); }};
  r["speculative.draft_model"] = {
      [](auto& c) { c.draft_model = "/models/draft"; },
      [](const SessionOptions& s) { return s.draft_model_path == "/models/draft"; },
      [](const auto& a, const auto& b) { return same_string(a.draft_model, b.draft_model); }};
  r["weights"] = {[](auto& c) { c.weights = "q8_0"; },
                  [](const SessionOptions& s) { return s.weights == "q8_0"; },
                  [](const auto& a, const auto& b) { return same_string(a.weights, b.weights); }};
  r["cache.prefix.disk.directory"] = {
      [](auto& c) { c.disk_cache_dir = "/tmp/d"; },
      [](const SessionOptions& s) { return s.cache.prefix.disk.directory == "/tmp/d"; },
      [](const auto& a, const auto& b) { return same_string(a.disk_cache_dir, b.disk_cache_dir); }};
  r["cache.redis.host"] = {
      [](auto& c) { c.redis_host = "redis.local"; },
      [](const SessionOptions& s) { return s.cache.redis.host == "redis.local"; },
      [](const auto& a, const auto& b) { return same_string(a.redis_host, b.redis_host); }};
  r["cache.prefix.memory.enabled"] = {
      [](auto& c) { c.prefix_cache_memory_bytes = -1; },
      [](const SessionOptions& s) { return !s.cache.prefix.memory.enabled; },
      same_int(&dti_session_options::prefix_cache_memory_bytes)};
  r["cache.prefix.memory.budget_bytes"] = {
      [](auto& c) { c.prefix_cache_memory_bytes = 12345; },
      [](const SessionOptions& s) { return s.cache.prefix.memory.budget_bytes == 12345; },
      same_int(&dti_session_options::prefix_cache_memory_bytes)};
  return r;
}

TEST(CapiSessionFields, EveryCarriedRowHasATestRow) {
  const auto r = rows();
  std::size_t carried = 0;
  for (const SessionFieldSpec& f : kSessionFields) {
    if (f.c_field == session::CField::kNone) continue;
    ++carried;
    EXPECT_EQ(r.count(f.key), 1u) << f.key << " (" << f.c_member << ")";
  }
  EXPECT_EQ(r.size(), carried);
}

TEST(CapiSessionFields, EveryCarriedRowRoundTrips) {
  for (const auto& [key, row] : rows()) {
    dti_session_options c = dti_session_options_default();
    row.edit(c);
    SessionOptions s;
    ASSERT_EQ(capi::to_session_options("test", &c, &s), DTI_OK) << key << ": " << dti_last_error();
    EXPECT_TRUE(row.changed(s)) << key << " did not reach SessionOptions";
    dti_session_options back = dti_session_options_default();
    ASSERT_EQ(capi::from_session_options(s, &back), DTI_OK) << key;
    EXPECT_TRUE(row.same(c, back)) << key << " did not come back";
    // Every other row keeps its default.
    const dti_session_options d = dti_session_options_default();
    for (const auto& [other, other_row] : rows()) {
      if (other == key || (key.rfind("cache.prefix.memory.", 0) == 0 &&
                           other.rfind("cache.prefix.memory.", 0) == 0)) {
        continue;  // the two memory rows share prefix_cache_memory_bytes
      }
      EXPECT_TRUE(other_row.same(d, back)) << other << " changed with " << key;
    }
  }
}

TEST(CapiSessionFields, CDefaultsAreTheCxxDefaults) {
  const dti_session_options c = dti_session_options_default();
  SessionOptions s;
  ASSERT_EQ(capi::to_session_options("test", &c, &s), DTI_OK);
  for (const auto& [key, row] : rows()) EXPECT_FALSE(row.changed(s)) << key;
}

TEST(CapiSessionFields, ValuesCCannotExpressAreRefused) {
  SessionOptions s;
  dti_session_options c = dti_session_options_default();
  s.mode = NumericsMode::kDeviceInvariant;
  EXPECT_EQ(capi::from_session_options(s, &c), DTI_INVALID_ARGUMENT);
  s = SessionOptions{};
  s.recorder.level = RecordLevel::kLogits;
  EXPECT_EQ(capi::from_session_options(s, &c), DTI_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace detinfer
