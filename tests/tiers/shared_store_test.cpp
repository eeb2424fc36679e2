// G4's store against real redis-server processes: blocks published by one
// store are found by another (one pipelined lookup) and come back byte for
// byte; a value overwritten with garbage or of another layout, a node that
// is down, stopped, restarted empty or killed is a miss, counted, never a
// wrong byte and never a hang; a 3-node cluster spreads the blocks.
#include "kvtier/tiers/shared/shared_store.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "kvtier/core/errors.hpp"
#include "kvtier/tiers/shared/redis_cluster.hpp"
#include "kvtier/tiers/shared/redis_url.hpp"
#include "support/redis_servers.hpp"

namespace kvtier::tiers::shared {
namespace {

using kvtier::testing::RedisServers;

KvLayout layout(std::uint32_t head_dim = 16) {
  return KvLayout(
      KvGeometry{.layers = 2, .kv_heads = 2, .head_dim = head_dim, .dtype = KvDtype::Bf16, .tokens_per_block = 16},
      PageLayout::PageMajor, 1);
}

g1::TieredBlock block(std::uint64_t n) {
  return g1::TieredBlock{.plh = PositionalLineageHash::from_raw(7, n),
                         .hash = SequenceHash(n * 100),
                         .parent = n > 1 ? std::optional<SequenceHash>((n - 1) * 100) : std::nullopt,
                         .local = LocalBlockHash(n),
                         .token_ids = std::vector<TokenId>(16, static_cast<TokenId>(n))};
}

std::vector<std::byte> page_of(std::uint64_t n, std::size_t bytes) {
  std::vector<std::byte> page(bytes);
  for (std::size_t i = 0; i < bytes; ++i) page[i] = static_cast<std::byte>((n * 37 + i * 11) & 0xFF);
  return page;
}

SharedStoreConfig config(const std::vector<std::string>& urls, std::string space = "test") {
  SharedStoreConfig c{.endpoints = {}, .key_namespace = std::move(space)};
  c.timeout = std::chrono::milliseconds(200);
  c.retry_after = std::chrono::milliseconds(200);
  for (const std::string& url : urls) c.endpoints.push_back(parse_redis_url(url));
  return c;
}

std::vector<PositionalLineageHash> plhs(std::uint64_t first, std::uint64_t last) {
  std::vector<PositionalLineageHash> out;
  for (std::uint64_t n = first; n <= last; ++n) out.push_back(block(n).plh);
  return out;
}

/// Publishes blocks [first, last] and waits until the store answered.
std::size_t publish(SharedStore& store, std::uint64_t first, std::uint64_t last) {
  std::vector<g1::TieredBlock> none;
  for (std::uint64_t n = first; n <= last; ++n) {
    EXPECT_EQ(store.write(block(n), page_of(n, store.page_bytes()), none), LowerTier::WriteStart::Started);
  }
  return store.poll(true).stored.size();
}

/// Looks blocks [first, last] up and reads those found; how many came back
/// whole and with their own bytes (a wrong byte fails the test).
std::size_t fetch(SharedStore& store, std::uint64_t first, std::uint64_t last) {
  const auto wanted = plhs(first, last);
  const auto found = store.lookup(wanted);
  std::vector<PositionalLineageHash> present;
  std::vector<std::uint64_t> numbers;
  for (std::size_t i = 0; i < found.size(); ++i) {
    if (!found[i]) continue;
    EXPECT_EQ(found[i]->hash, block(first + i).hash);
    EXPECT_EQ(found[i]->token_ids, block(first + i).token_ids);
    present.push_back(wanted[i]);
    numbers.push_back(first + i);
  }
  if (present.empty()) return 0;
  std::vector<std::vector<std::byte>> pages(present.size(),
                                            std::vector<std::byte>(store.page_bytes(), std::byte{0xEE}));
  std::vector<std::byte*> pointers;
  for (auto& page : pages) pointers.push_back(page.data());
  EXPECT_TRUE(store.read(present, pointers).has_value());
  const LowerTierProgress progress = store.poll(true);
  EXPECT_EQ(progress.reads.size(), 1U);
  std::size_t whole = 0;
  for (std::size_t i = 0; i < present.size() && !progress.reads.empty(); ++i) {
    if (!progress.reads[0].ok[i]) {
      EXPECT_EQ(pages[i], std::vector<std::byte>(store.page_bytes(), std::byte{0xEE})) << "a failed read wrote";
      continue;
    }
    EXPECT_EQ(pages[i], page_of(numbers[i], store.page_bytes())) << "block " << numbers[i];
    ++whole;
  }
  return whole;
}

/// A reader that keeps at most `values` looked-up values for their reads (0: lookups fetch headers only).
SharedStoreConfig staging(const std::vector<std::string>& urls, std::uint32_t values) {
  SharedStoreConfig c = config(urls);
  c.max_staged_values = values;
  return c;
}

/// Flips the last byte of block n's value in the store: its payload changes under its header.
void flip_last_byte(RedisServers& redis, const SharedStore& store, std::uint64_t n) {
  const std::string key = store.key(block(n).plh);
  const std::string length = redis.cli(0, "strlen " + key);
  ASSERT_EQ(redis.cli(0, "setrange " + key + " " + std::to_string(std::stol(length) - 1) + " X"), length);
}

/// Blocks 1 to 3 read into pages of 0xEE bytes, and what the poll after it collected.
struct FirstThree {
  std::vector<std::vector<std::byte>> pages;
  LowerTierProgress progress;
};
FirstThree read_first_three(SharedStore& reader) {
  FirstThree out{
      .pages = std::vector<std::vector<std::byte>>(3, std::vector<std::byte>(reader.page_bytes(), std::byte{0xEE})),
      .progress = {}};
  std::vector<std::byte*> pointers{out.pages[0].data(), out.pages[1].data(), out.pages[2].data()};
  EXPECT_TRUE(reader.read(plhs(1, 3), pointers).has_value());
  out.progress = reader.poll(true);
  EXPECT_EQ(out.progress.reads.size(), 1U);
  return out;
}

TEST(RedisUrl, ParsesHostAndPortAndRefusesTheRest) {
  EXPECT_EQ(parse_redis_url("redis://127.0.0.1:7000"), (RedisEndpoint{.host = "127.0.0.1", .port = 7000}));
  EXPECT_EQ(parse_redis_url("redis://localhost"), (RedisEndpoint{.host = "localhost", .port = 6379}));
  for (const char* bad : {"http://h:1", "redis://:7000", "redis://h:0", "redis://h:70000", "redis://h:12x",
                          "redis://u@h:1", "redis://h:1/2"}) {
    EXPECT_THROW((void)parse_redis_url(bad), ConfigError) << bad;
  }
}

TEST(RedisUrl, CredentialsComeFromTheUrlOrTheEnvironmentAndAreNeverShown) {
  EXPECT_EQ(parse_redis_url("redis://:s3cret@127.0.0.1:7000"), (RedisEndpoint{.host = "127.0.0.1", .port = 7000}));
  EXPECT_EQ(parse_redis_auth("redis://:s3cret@h:1"), (RedisAuth{.user = "", .password = "s3cret"}));
  EXPECT_EQ(parse_redis_auth("redis://alice:p@ss@h"), (RedisAuth{.user = "alice", .password = "p@ss"}));
  EXPECT_EQ(parse_redis_auth("redis://h:1"), RedisAuth{});
  EXPECT_EQ(redacted_redis_url("redis://alice:s3cret@h:1"), "redis://alice:***@h:1");
  EXPECT_EQ(redacted_redis_url("redis://:s3cret@h"), "redis://:***@h");
  EXPECT_EQ(redacted_redis_url("redis://h:1"), "redis://h:1");
  try {
    (void)parse_redis_url("redis://:s3cret@h:99999");
    ADD_FAILURE() << "a bad port was taken";
  } catch (const ConfigError& error) {
    EXPECT_EQ(std::string(error.what()).find("s3cret"), std::string::npos) << error.what();
  }
  const std::vector<std::string> same{"redis://:a@h:1", "redis://h:2", "redis://:a@h:3"};
  EXPECT_EQ(redis_auth_of(same), (RedisAuth{.user = "", .password = "a"}));
  const std::vector<std::string> different{"redis://:a@h:1", "redis://:b@h:2"};
  EXPECT_THROW((void)redis_auth_of(different), ConfigError);
  const std::vector<std::string> none{"redis://h:1"};
  ::setenv("KVTIER_REDIS_PASSWORD", "from-env", 1);
  EXPECT_EQ(redis_auth_of(none), (RedisAuth{.user = "", .password = "from-env"}));
  EXPECT_EQ(redis_auth_of(same).password, "a");  // the URL's win
  ::unsetenv("KVTIER_REDIS_PASSWORD");
  EXPECT_EQ(redis_auth_of(none), RedisAuth{});
}

TEST(RedisCluster, KeySlotsAreRedisClusters) {
  // The values Redis' CLUSTER KEYSLOT gives (its cluster spec's examples).
  EXPECT_EQ(key_slot("foo"), 12182);
  EXPECT_EQ(key_slot("bar"), 5061);
  EXPECT_EQ(key_slot("123456789"), 0x31C3 % kClusterSlots);
  // And what redis-server 7.0 answered for a key of ours, a one-byte key and bytes past 0x7f.
  EXPECT_EQ(key_slot("kvtier-bench-1-0:00000000000007c0"), 2045);
  EXPECT_EQ(key_slot("a"), 15495);
  EXPECT_EQ(key_slot("\xff\x80key"), 14188);
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("{user1000}.followers"));
  EXPECT_EQ(key_slot("{}x"), key_slot("{}x"));
  EXPECT_NE(key_slot("{}x"), key_slot("x"));  // an empty tag is no tag: the whole key
}

TEST(SharedStore, OneStorePublishesAndAnotherFetchesByteForByte) {
  RedisServers redis(1);
  KVTIER_REQUIRE_REDIS(redis);
  SharedStore writer(config(redis.urls()), layout());
  EXPECT_EQ(publish(writer, 1, 20), 20U);
  EXPECT_EQ(writer.stats().blocks_written, 20U);
  EXPECT_TRUE(writer.contains(block(3).plh));
  std::vector<g1::TieredBlock> none;
  EXPECT_EQ(writer.write(block(3), page_of(3, writer.page_bytes()), none), LowerTier::WriteStart::Present);

  SharedStore reader(config(redis.urls()), layout());  // another instance
  EXPECT_FALSE(reader.contains(block(3).plh));
  EXPECT_EQ(fetch(reader, 1, 20), 20U);
  EXPECT_EQ(reader.stats().blocks_read, 20U);
  EXPECT_EQ(reader.shared_stats().lookups, 1U);  // one pipelined round trip for 20 blocks
  EXPECT_EQ(fetch(reader, 21, 24), 0U);          // never published
  EXPECT_EQ(reader.write(block(5), page_of(5, reader.page_bytes()), none), LowerTier::WriteStart::Present);
  // Published again by a third instance that never looked: SET NX keeps the first value and says so.
  SharedStore third(config(redis.urls()), layout());
  EXPECT_EQ(publish(third, 5, 5), 1U);
  EXPECT_EQ(third.shared_stats().already_present, 1U);
  EXPECT_EQ(third.stats().blocks_written, 0U);
  EXPECT_EQ(reader.shared_stats().errors + third.shared_stats().errors, 0U);
}

// A publish batch goes to the socket from the SETs' own buffers: 64 pages of
// 256 KiB (16 MiB, far past what a socket buffers) arrive whole and in order.
TEST(SharedStore, APublishBatchLargerThanTheSocketBufferArrivesWhole) {
  RedisServers redis(1);
  KVTIER_REQUIRE_REDIS(redis);
  SharedStoreConfig roomy = config(redis.urls());
  roomy.timeout = std::chrono::milliseconds(2000);  // 16 MiB under a sanitizer, not a stall
  SharedStore writer(roomy, layout(1024));
  ASSERT_EQ(writer.page_bytes(), std::size_t{256} << 10);
  EXPECT_EQ(publish(writer, 1, 64), 64U);
  EXPECT_EQ(writer.stats().blocks_written, 64U);
  SharedStore reader(roomy, layout(1024));
  EXPECT_EQ(fetch(reader, 1, 64), 64U);
  EXPECT_EQ(writer.shared_stats().errors + reader.shared_stats().errors, 0U);
}

TEST(SharedStore, NamespacesAndLayoutsDoNotShare) {
  RedisServers redis(1);
  KVTIER_REQUIRE_REDIS(redis);
  SharedStore a(config(redis.urls(), "model-a"), layout());
  ASSERT_EQ(publish(a, 1, 4), 4U);
  SharedStore b(config(redis.urls(), "model-b"), layout());
  EXPECT_EQ(fetch(b, 1, 4), 0U);
  SharedStore other(config(redis.urls(), "model-a"), layout(32));  // another page layout
  EXPECT_EQ(fetch(other, 1, 4), 0U);
}

// KV cache groups (model-geometry.md §5): a value carries its group's block
// format; G4 neither publishes nor serves a block in another one.
TEST(SharedStore, AValueOfAnotherGroupFormatIsRefusedAndCounted) {
  RedisServers redis(1);
  KVTIER_REQUIRE_REDIS(redis);
  const auto grouped = [](std::uint64_t n, std::uint64_t group, std::uint64_t format) {
    g1::TieredBlock b = block(n);
    b.plh = g1::group_tier_key(b.hash, group);
    b.format = format;
    return b;
  };
  SharedStoreConfig mine = config(redis.urls());
  mine.group_formats = {0xA0, 0xA1};
  SharedStore writer(std::move(mine), layout());
  const auto page = page_of(1, writer.page_bytes());
  std::vector<g1::TieredBlock> none;
  EXPECT_EQ(writer.write(grouped(1, 0, 0xA1), page, none), LowerTier::WriteStart::NoRoom);  // group 1's format
  EXPECT_EQ(writer.stats().format_refusals, 1U);
  ASSERT_EQ(writer.write(grouped(1, 0, 0xA0), page, none), LowerTier::WriteStart::Started);
  ASSERT_EQ(writer.write(grouped(1, 1, 0xA1), page, none), LowerTier::WriteStart::Started);
  EXPECT_EQ(writer.poll(true).stored.size(), 2U);
  // Another instance whose group 0 is another page format of the same bytes (another --kv-cache-dtype).
  SharedStoreConfig theirs = config(redis.urls());
  theirs.group_formats = {0xB0, 0xA1};
  SharedStore reader(std::move(theirs), layout());
  const std::vector<PositionalLineageHash> keys{grouped(1, 0, 0).plh, grouped(1, 1, 0).plh};
  const auto found = reader.lookup(keys);
  EXPECT_FALSE(found[0]);  // never served into a group of another format
  ASSERT_TRUE(found[1]);
  EXPECT_EQ(found[1]->format, 0xA1U);
  EXPECT_EQ(reader.stats().format_refusals, 1U);
  EXPECT_EQ(reader.shared_stats().other_layout, 1U);
}

TEST(SharedStore, GarbageAndAnotherLayoutsValueAreMissesAndRemoved) {
  RedisServers redis(1);
  KVTIER_REQUIRE_REDIS(redis);
  SharedStore store(config(redis.urls()), layout());
  ASSERT_EQ(publish(store, 1, 6), 6U);
  // Another client overwrites block 2 with garbage, and block 4 with a value
  // of another layout under our key (a record that checks, but not for us).
  ASSERT_EQ(redis.cli(0, "set " + store.key(block(2).plh) + " garbage"), "OK");
  SharedStore foreign(config(redis.urls(), "foreign"), layout(32));
  ASSERT_EQ(publish(foreign, 4, 4), 1U);
  ASSERT_EQ(redis.cli(0, "copy " + foreign.key(block(4).plh) + " " + store.key(block(4).plh) + " replace"), "1");

  SharedStore reader(config(redis.urls()), layout());
  const auto found = reader.lookup(plhs(1, 6));
  EXPECT_TRUE(found[0] && found[2] && found[4] && found[5]);
  EXPECT_FALSE(found[1]);
  EXPECT_FALSE(found[3]);
  EXPECT_EQ(reader.stats().checksum_failures, 2U);
  EXPECT_EQ(reader.shared_stats().other_layout, 1U);
  EXPECT_EQ(reader.shared_stats().values_deleted, 2U);  // so they can be published again
  EXPECT_EQ(redis.cli(0, "exists " + store.key(block(2).plh)), "0");
  EXPECT_EQ(publish(reader, 2, 2), 1U);
  EXPECT_EQ(fetch(reader, 2, 2), 1U);
}

// A lookup that fetches headers only (no staging): the worker reads the
// values and checks each again.
TEST(SharedStore, AValueDamagedBetweenLookupAndReadIsNeverServed) {
  RedisServers redis(1);
  KVTIER_REQUIRE_REDIS(redis);
  SharedStore store(config(redis.urls()), layout());
  ASSERT_EQ(publish(store, 1, 3), 3U);
  SharedStore reader(staging(redis.urls(), 0), layout());
  const auto found = reader.lookup(plhs(1, 3));
  ASSERT_TRUE(found[0] && found[1] && found[2]);
  // The payload changes under its header: one byte flipped at its end, and block 3 gone.
  flip_last_byte(redis, store, 2);
  ASSERT_EQ(redis.cli(0, "del " + store.key(block(3).plh)), "1");
  const auto [pages, progress] = read_first_three(reader);
  ASSERT_EQ(progress.reads.size(), 1U);
  EXPECT_EQ(progress.reads[0].ok, (std::vector<bool>{true, false, false}));
  EXPECT_EQ(pages[0], page_of(1, reader.page_bytes()));
  EXPECT_EQ(pages[1], std::vector<std::byte>(reader.page_bytes(), std::byte{0xEE}));
  ASSERT_EQ(progress.dropped.size(), 1U);
  EXPECT_EQ(progress.dropped[0].hash, block(2).hash);  // this instance removed it
  EXPECT_EQ(reader.stats().checksum_failures, 1U);
  EXPECT_EQ(reader.shared_stats().values_missing, 1U);
  EXPECT_FALSE(reader.find(block(2).plh));
}

// One round trip: the lookup fetches and verifies the values; the read
// copies those verified bytes without asking the store again, so a value
// damaged or removed after the lookup changes nothing served. A value damaged
// before it is not found, and removed; a miss moves no payload.
TEST(SharedStore, ALookupFetchesVerifiedValuesAndTheReadServesThemWithoutAnotherRoundTrip) {
  RedisServers redis(1);
  KVTIER_REQUIRE_REDIS(redis);
  SharedStore store(config(redis.urls()), layout());
  ASSERT_EQ(publish(store, 1, 4), 4U);
  flip_last_byte(redis, store, 4);  // before the lookup
  SharedStore reader(config(redis.urls()), layout());
  const auto found = reader.lookup(plhs(1, 6));
  EXPECT_TRUE(found[0] && found[1] && found[2]);
  EXPECT_FALSE(found[3]) << "a value whose payload fails its checksum was found";
  EXPECT_FALSE(found[4] || found[5]);
  EXPECT_EQ(reader.stats().checksum_failures, 1U);
  EXPECT_EQ(redis.cli(0, "exists " + store.key(block(4).plh)), "0");
  EXPECT_EQ(reader.shared_stats().values_staged, 3U);
  flip_last_byte(redis, store, 2);  // after it
  ASSERT_EQ(redis.cli(0, "del " + store.key(block(3).plh)), "1");
  const auto processed = [&] {
    const std::string stats = redis.cli(0, "info stats");
    const auto at = stats.find("total_commands_processed:");
    return std::stoull(stats.substr(at + 25));
  };
  const std::uint64_t before = processed();
  const auto [pages, progress] = read_first_three(reader);
  ASSERT_EQ(progress.reads.size(), 1U);
  EXPECT_EQ(progress.reads[0].ok, (std::vector<bool>{true, true, true}));
  for (std::uint64_t n = 1; n <= 3; ++n) EXPECT_EQ(pages[n - 1], page_of(n, reader.page_bytes())) << "block " << n;
  EXPECT_EQ(processed(), before + 1) << "the read asked the store (the one command is INFO itself)";
  EXPECT_EQ(reader.stats().blocks_read, 3U);
  // Staged values are taken by their read: the next lookup asks the store again.
  const auto again = reader.lookup(plhs(1, 3));
  EXPECT_TRUE(again[0]);
  EXPECT_FALSE(again[1]);  // damaged now: refused and removed
  EXPECT_FALSE(again[2]);  // gone
}

// Staging is bounded: beyond max_staged_values a lookup fetches headers, the
// oldest staged values make room, and reads of the rest go to the store.
TEST(SharedStore, StagedValuesAreBoundedAndTheRestAreReadFromTheStore) {
  RedisServers redis(1);
  KVTIER_REQUIRE_REDIS(redis);
  SharedStore store(config(redis.urls()), layout());
  ASSERT_EQ(publish(store, 1, 6), 6U);
  SharedStore reader(staging(redis.urls(), 2), layout());
  const auto found = [](const std::vector<std::optional<g1::TieredBlock>>& blocks) {
    return std::count_if(blocks.begin(), blocks.end(), [](const auto& b) { return b.has_value(); });
  };
  ASSERT_EQ(found(reader.lookup(plhs(1, 2))), 2);
  EXPECT_EQ(found(reader.lookup(plhs(3, 6))), 4);  // 3 and 4 staged (1 and 2 make room), 5 and 6 by header
  EXPECT_EQ(reader.shared_stats().values_staged, 4U);
  EXPECT_EQ(reader.shared_stats().staged_unread, 2U);
  EXPECT_EQ(fetch(reader, 1, 6), 6U);  // every block served with its own bytes, staged or not
}

TEST(SharedStore, AStoreDownAtStartIsAMissNotAnErrorNorAHang) {
  // No server on this port: connection refused.
  SharedStore store(config({"redis://127.0.0.1:1"}), layout());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(fetch(store, 1, 8), 0U);
  EXPECT_EQ(publish(store, 1, 8), 0U);  // written nowhere: not stored
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_GT(store.shared_stats().errors, 0U);
  EXPECT_TRUE(store.shared_stats().degraded);
  EXPECT_EQ(store.stats().write_failures, 8U);
  EXPECT_FALSE(store.contains(block(1).plh));  // not published: a later eviction tries again
}

/// A store that requires a password (requirepass) or an ACL user: the right
/// credentials publish and fetch; none or wrong ones are misses, counted,
/// never a hang or an exception.
TEST(SharedStore, AStoreBehindAuthServesOnlyWhoSaysTheRightPassword) {
  RedisServers redis(1);
  KVTIER_REQUIRE_REDIS(redis);
  ASSERT_EQ(redis.cli(0, "ACL SETUSER alice on '>alice-pw' '~*' '+@all'"), "OK");
  ASSERT_EQ(redis.cli(0, "CONFIG SET requirepass default-pw"), "OK");
  SharedStoreConfig with_password = config(redis.urls());
  with_password.auth = RedisAuth{.user = "", .password = "default-pw"};
  SharedStore writer(with_password, layout());
  EXPECT_EQ(publish(writer, 1, 6), 6U);
  EXPECT_FALSE(writer.shared_stats().degraded);

  SharedStoreConfig as_alice = config(redis.urls());
  as_alice.auth = RedisAuth{.user = "alice", .password = "alice-pw"};
  SharedStore alice(as_alice, layout());
  EXPECT_EQ(fetch(alice, 1, 6), 6U);

  SharedStore anonymous(config(redis.urls()), layout());  // NOAUTH on every command
  EXPECT_EQ(fetch(anonymous, 1, 6), 0U);
  EXPECT_GT(anonymous.shared_stats().errors + (anonymous.shared_stats().degraded ? 1U : 0U), 0U);
  SharedStoreConfig wrong = config(redis.urls());
  wrong.auth = RedisAuth{.user = "alice", .password = "not-it"};
  SharedStore refused(wrong, layout());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(fetch(refused, 1, 6), 0U);
  EXPECT_EQ(publish(refused, 7, 8), 0U);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  EXPECT_TRUE(refused.shared_stats().degraded);
  EXPECT_EQ(fetch(alice, 7, 8), 0U);  // nothing was written by the refused store
}

TEST(SharedStore, AStoppedNodeTimesOutAndARestartedEmptyOneIsMisses) {
  RedisServers redis(1);
  KVTIER_REQUIRE_REDIS(redis);
  SharedStore store(config(redis.urls()), layout());
  ASSERT_EQ(publish(store, 1, 4), 4U);
  // A node that answers nothing (SIGSTOP): each call is bounded by the timeout.
  ASSERT_TRUE(redis.signal(0, "STOP"));
  SharedStore reader(config(redis.urls()), layout());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(fetch(reader, 1, 4), 0U);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  EXPECT_GT(reader.shared_stats().errors, 0U);
  ASSERT_TRUE(redis.signal(0, "CONT"));
  // Killed and started again, empty: what the lookup found is gone.
  ASSERT_TRUE(redis.kill(0));
  ASSERT_TRUE(redis.restart_single());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // past retry_after: the node is tried again
  EXPECT_EQ(fetch(store, 1, 4), 0U);
  EXPECT_EQ(publish(store, 1, 4), 4U);  // the misses forgot them: published again
  EXPECT_EQ(fetch(store, 1, 4), 4U);
}

TEST(SharedStore, AClusterSpreadsBlocksAndAKilledShardLosesOnlyItsOwn) {
  RedisServers redis(3);
  KVTIER_REQUIRE_REDIS(redis);
  // One seed is enough: the rest of the cluster is discovered.
  SharedStore store(config({redis.urls()[1]}), layout());
  ASSERT_EQ(publish(store, 1, 90), 90U);
  long total = 0;
  for (unsigned node = 0; node < 3; ++node) {
    EXPECT_GT(redis.keys(node), 10) << "node " << node;  // hash slots spread the blocks
    total += redis.keys(node);
  }
  EXPECT_EQ(total, 90);
  SharedStore reader(config(redis.urls()), layout());
  EXPECT_EQ(fetch(reader, 1, 90), 90U);
  EXPECT_EQ(reader.shared_stats().lookups, 1U);

  const long lost = redis.keys(2);
  ASSERT_TRUE(redis.kill(2));
  SharedStore after(config(redis.urls()), layout());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(fetch(after, 1, 90), static_cast<std::size_t>(90 - lost));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_GT(after.shared_stats().errors, 0U);
  EXPECT_EQ(after.stats().checksum_failures, 0U);
}

}  // namespace
}  // namespace kvtier::tiers::shared
