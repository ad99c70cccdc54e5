// The id tables of mapper_core, checked against plain models over long random runs, so that growth, eviction,
// re-insertion and the backward-shift deletion of id_slots are exercised in every order:
// - recent_ids, the bounded set of closed tool-call ids every mapper keeps (model: a queue of the last `capacity`
//   distinct ids inserted);
// - open_calls, the open tool calls in call order (model: a vector in call order).
#include "mapper_core.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

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

// Random adds (of ids not open), removals and lookups, with phases that open many calls at once (the table grows and
// rehashes) and phases that close most of them.
void check_open_calls(std::size_t distinct_ids, std::size_t steps, std::size_t check_every, std::uint32_t seed) {
  open_calls calls;
  struct model_call {
    std::string id, name, last_output;
  };
  std::vector<model_call> model;  // in call order
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::size_t> pick(0, distinct_ids - 1);
  auto id = [](std::size_t n) { return (n % 3 == 0 ? "toolu_01" : "item_") + std::to_string(n); };
  auto in_model = [&](const std::string& x) {
    return std::find_if(model.begin(), model.end(), [&](const model_call& c) { return c.id == x; });
  };
  for (std::size_t i = 0; i < steps; ++i) {
    const bool opening = (i / 500) % 2 == 0;  // phases of mostly adds, then mostly removals
    const std::string x = id(pick(rng));
    const std::uint32_t h = id_slots::hash_of(x);
    const auto m = in_model(x);
    open_calls::call* c = calls.find(x, h);
    ASSERT_EQ(c != nullptr, m != model.end()) << x << " (#" << i << ")";
    if (c == nullptr) {
      if (!opening && rng() % 4 != 0) continue;
      open_calls::call& added = calls.add(x, h, "tool" + std::to_string(i));
      EXPECT_EQ(added.id, x);
      EXPECT_TRUE(added.last_output.empty());
      model.push_back({x, "tool" + std::to_string(i), {}});
    } else if (opening && rng() % 3 != 0) {
      ASSERT_EQ(c->name, m->name);
      ASSERT_EQ(c->last_output, m->last_output);
      c->last_output = m->last_output = "out" + std::to_string(i);
    } else {
      calls.remove(*c);
      model.erase(m);
    }
    ASSERT_EQ(calls.size(), model.size());
    if (i % check_every == 0) {
      for (std::size_t n = 0; n < distinct_ids; ++n) {
        const std::string y = id(n);
        ASSERT_EQ(calls.find(y, id_slots::hash_of(y)) != nullptr, in_model(y) != model.end()) << y << " (#" << i << ")";
      }
      const auto order = calls.in_order();
      ASSERT_EQ(order.size(), model.size());
      for (std::size_t k = 0; k < order.size(); ++k) {
        ASSERT_EQ(order[k]->id, model[k].id) << "call order, #" << i;
        ASSERT_EQ(order[k]->name, model[k].name);
      }
    }
  }
  calls.clear();
  EXPECT_EQ(calls.size(), 0U);
  EXPECT_TRUE(calls.in_order().empty());
  for (std::size_t n = 0; n < distinct_ids; ++n) EXPECT_EQ(calls.find(id(n), id_slots::hash_of(id(n))), nullptr);
  calls.add("again", id_slots::hash_of("again"), "t");  // usable after clear()
  EXPECT_NE(calls.find("again", id_slots::hash_of("again")), nullptr);
}

TEST(OpenCalls, MatchesAModelInCallOrder) {
  check_open_calls(3, 2000, 7, 5);
  check_open_calls(40, 10000, 97, 6);
  check_open_calls(3000, 30000, 1499, 7);  // hundreds open at once
}

TEST(OpenCalls, AClosedCallsEntryIsReusedByTheNext) {
  open_calls calls;
  const open_calls::call* first = &calls.add("a", id_slots::hash_of("a"), "bash");
  calls.remove(*calls.find("a", id_slots::hash_of("a")));
  EXPECT_EQ(calls.find("a", id_slots::hash_of("a")), nullptr);
  const open_calls::call& second = calls.add("b", id_slots::hash_of("b"), "read");
  EXPECT_EQ(&second, first);  // the same strings, refilled
  EXPECT_EQ(second.name, "read");
  EXPECT_EQ(calls.find("b", id_slots::hash_of("b")), &second);
}

}  // namespace
}  // namespace agenthost::mapper::detail
