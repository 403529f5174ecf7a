// Issue 27 (SessionOptions field table): open()'s range checks are the table's ranged rows.
// Every ranged row is refused just below and just above its range with
// Error(kInvalidArgument) naming the member; its ends are accepted; the defaults pass.
#include "session/session_fields.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <type_traits>

#include "detinfer/error.h"
#include "detinfer/session.h"
#include "session/tiny_session.h"

namespace detinfer::session {
namespace {

using testing::tiny_model_dir;
using testing::tiny_options;

// Sets the row named `member` to `value`; false when the member's type cannot hold it.
bool set_row(SessionOptions& o, const std::string& member, std::int64_t value) {
  bool done = false;
  for_each_session_field(o, [&](const SessionFieldSpec& f, auto& v) {
    using T = std::decay_t<decltype(v)>;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if (member != f.member) return;
      if (value < static_cast<std::int64_t>(std::numeric_limits<T>::min()) ||
          value > static_cast<std::int64_t>(std::numeric_limits<T>::max())) {
        return;
      }
      v = static_cast<T>(value);
      done = true;
    }
  });
  return done;
}

TEST(SessionFields, TheDefaultsPass) { EXPECT_NO_THROW(check_session_ranges(tiny_options())); }

TEST(SessionFields, EveryRangedRowIsCheckedWithItsName) {
  int ranged = 0;
  for (const SessionFieldSpec& f : kSessionFields) {
    if (!f.ranged()) continue;
    ++ranged;
    for (std::int64_t bad : {f.lo - 1, f.hi + 1}) {
      SessionOptions o = tiny_options();
      ASSERT_TRUE(set_row(o, f.member, bad)) << f.member << " = " << bad;
      try {
        check_session_ranges(o);
        ADD_FAILURE() << f.member << " = " << bad << " was accepted";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << f.member;
        EXPECT_EQ(e.field(), f.member);
        EXPECT_NE(e.message().find(std::string("SessionOptions.") + f.member + " must be in [" +
                                   std::to_string(f.lo) + ", " + std::to_string(f.hi) + "]"),
                  std::string::npos)
            << e.message();
      }
    }
    for (std::int64_t good : {f.lo, f.hi}) {
      SessionOptions o = tiny_options();
      ASSERT_TRUE(set_row(o, f.member, good)) << f.member;
      EXPECT_NO_THROW(check_session_ranges(o)) << f.member << " = " << good;
    }
  }
  EXPECT_EQ(ranged, 8);  // threads, kv_budget_bytes, kv_block_size, max_batch, ...
}

TEST(SessionFields, OpenRefusesAnOutOfRangeRowNamingIt) {
  SessionOptions o = tiny_options();
  o.max_batch = 0;
  try {
    DeterministicSession::open(tiny_model_dir(), o);
    ADD_FAILURE() << "max_batch 0 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.field(), "max_batch");
    EXPECT_NE(e.message().find("SessionOptions.max_batch must be in [1, 4096], got 0"),
              std::string::npos);
  }
}

// Keys, flags and members are unique; the visit order is the array's.
TEST(SessionFields, RowsAreUniqueAndVisitedInOrder) {
  std::set<std::string> keys, flags, members;
  for (const SessionFieldSpec& f : kSessionFields) {
    EXPECT_TRUE(keys.insert(f.key).second) << f.key;
    EXPECT_TRUE(flags.insert(f.flag).second) << f.flag;
    EXPECT_TRUE(members.insert(f.member).second) << f.member;
    EXPECT_EQ(std::strncmp(f.flag, "--", 2), 0) << f.flag;
    EXPECT_GT(std::strlen(f.doc), 0u) << f.key;
    EXPECT_EQ(f.c_field == CField::kNone, std::strlen(f.c_member) == 0) << f.key;
  }
  SessionOptions o;
  std::size_t i = 0;
  for_each_session_field(o, [&](const SessionFieldSpec& f, auto&) {
    ASSERT_LT(i, kSessionFieldCount);
    EXPECT_EQ(&f, &kSessionFields[i]) << f.key;
    ++i;
  });
  EXPECT_EQ(i, kSessionFieldCount);
}

}  // namespace
}  // namespace detinfer::session
