// detail::recent_ids, the bounded set of closed tool-call ids every mapper keeps: checked against a plain model (a
// queue of the last `capacity` distinct ids inserted) over long random runs, so that eviction, re-insertion and the
// table's backward-shift deletion are exercised in every order.
#include "mapper_core.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <unordered_set>

namespace agenthost::mapper::detail {
namespace {

void check_against_model(std::size_t capacity, std::size_t distinct_ids, std::size_t inserts, std::uint32_t seed) {
  recent_ids set(capacity);
  std::deque<std::string> model;       // the ids the set must hold, oldest first
  std::unordered_set<std::string> in;  // the same ids
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::size_t> pick(0, distinct_ids - 1);
  auto id = [](std::size_t n) { return (n % 3 == 0 ? "toolu_01" : "item_") + std::to_string(n); };
  for (std::size_t i = 0; i < inserts; ++i) {
    const std::string x = id(pick(rng));
    const bool present = in.count(x) != 0;
    ASSERT_EQ(set.contains(x), present) << "before inserting " << x << " (#" << i << ")";
    set.insert(x);
    if (!present) {
      model.push_back(x);
      in.insert(x);
      if (model.size() > capacity) {
        in.erase(model.front());
        model.pop_front();
      }
    }
    ASSERT_TRUE(set.contains(x));
    if (i % 97 == 0) {  // every id of the pool, now and then
      for (std::size_t n = 0; n < distinct_ids; ++n) {
        const std::string y = id(n);
        ASSERT_EQ(set.contains(y), in.count(y) != 0) << y << " (#" << i << ")";
      }
    }
  }
}

TEST(RecentIds, MatchesAModelOfTheLastCapacityIds) {
  check_against_model(1, 4, 2000, 1);
  check_against_model(7, 20, 5000, 2);
  check_against_model(64, 100, 20000, 3);
  check_against_model(1024, 1500, 40000, 4);  // the mappers' size, ids coming back after eviction
}

TEST(RecentIds, ForgetsTheOldestWhenFull) {
  recent_ids set(3);
  for (const char* x : {"a", "b", "c"}) set.insert(x);
  set.insert("a");  // present: nothing changes
  set.insert("d");  // "a" is the oldest
  EXPECT_FALSE(set.contains("a"));
  for (const char* x : {"b", "c", "d"}) EXPECT_TRUE(set.contains(x)) << x;
  EXPECT_FALSE(set.contains(""));
  set.insert("");
  EXPECT_TRUE(set.contains(""));
  EXPECT_FALSE(set.contains("b"));
}

}  // namespace
}  // namespace agenthost::mapper::detail
