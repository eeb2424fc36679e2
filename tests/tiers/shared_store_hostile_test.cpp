// G4 against a hostile or careless store (issue 31): forged values are
// refused under a tier key; values too large, empty or of another type are
// refused without reading them whole and replaced; another version's values
// are kept; a stalled store costs one timeout per back-off, not one per
// lookup; ASK redirections, IPv6 hosts, percent-encoded passwords and
// read-only users work; a fake server streaming an endless reply is cut off.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <hiredis/hiredis.h>
#include "kvtier/core/errors.hpp"
#include "kvtier/tiers/shared/node_breaker.hpp"
#include "kvtier/tiers/shared/redis_node.hpp"
#include "kvtier/tiers/shared/redis_url.hpp"
#include "kvtier/tiers/shared/shared_store.hpp"

#include "support/record_forgery.hpp"
#include "support/redis_servers.hpp"
#include "support/tier_test_blocks.hpp"

namespace kvtier::tiers::shared {
namespace {

using kvtier::testing::RedisServers;
using Clock = std::chrono::steady_clock;

KvLayout layout(std::uint32_t layers = 2, std::uint32_t heads = 2, std::uint32_t dim = 16) {
  return kvtier::testing::tier_test_layout(layers, heads, dim);
}
g1::TieredBlock block(std::uint64_t n) { return kvtier::testing::tier_test_block(n, 9); }
std::vector<std::byte> page_of(std::uint64_t n, std::size_t bytes) { return kvtier::testing::tier_test_page(n, bytes); }
TierKey key_of(char fill) { return kvtier::testing::tier_test_key(fill); }

SharedStoreConfig config(const std::vector<std::string>& urls, std::optional<TierKey> key = std::nullopt) {
  SharedStoreConfig c{.endpoints = {}, .key_namespace = "hostile", .key = std::move(key)};
  c.timeout = std::chrono::milliseconds(200);
  c.retry_after = std::chrono::milliseconds(200);
  for (const std::string& url : urls) c.endpoints.push_back(parse_redis_url(url));
  return c;
}

std::size_t publish(SharedStore& store, std::uint64_t first, std::uint64_t last) {
  std::vector<g1::TieredBlock> none;
  for (std::uint64_t n = first; n <= last; ++n) (void)store.write(block(n), page_of(n, store.page_bytes()), none);
  return store.poll(true).stored.size();
}

/// Blocks [first, last] found and read back with their own bytes (a wrong byte fails the test).
std::size_t fetch(SharedStore& store, std::uint64_t first, std::uint64_t last, std::size_t* wrong = nullptr) {
  std::vector<PositionalLineageHash> wanted;
  for (std::uint64_t n = first; n <= last; ++n) wanted.push_back(block(n).plh);
  const auto found = store.lookup(wanted);
  std::vector<PositionalLineageHash> present;
  std::vector<std::uint64_t> numbers;
  for (std::size_t i = 0; i < found.size(); ++i) {
    if (!found[i]) continue;
    present.push_back(wanted[i]);
    numbers.push_back(first + i);
  }
  if (present.empty()) return 0;
  std::vector<std::vector<std::byte>> pages(present.size(), std::vector<std::byte>(store.page_bytes()));
  std::vector<std::byte*> pointers;
  for (auto& page : pages) pointers.push_back(page.data());
  EXPECT_TRUE(store.read(present, pointers).has_value());
  const LowerTierProgress progress = store.poll(true);
  std::size_t whole = 0;
  for (std::size_t i = 0; i < present.size() && !progress.reads.empty(); ++i) {
    if (!progress.reads[0].ok[i]) continue;
    if (pages[i] == page_of(numbers[i], store.page_bytes())) {
      ++whole;
    } else if (wrong != nullptr) {
      ++*wrong;
    } else {
      ADD_FAILURE() << "block " << numbers[i] << " came back with other bytes";
    }
  }
  return whole;
}

/// The node of a cluster that owns `key`'s slot.
unsigned owner_of(const RedisServers& redis, unsigned nodes, const std::string& key) {
  for (unsigned node = 0; node < nodes; ++node) {
    if (redis.cli(node, "EXISTS '" + key + "'") == "1") return node;
  }
  return nodes;
}

/// What a client without the tier key can do to a value: read it, change
/// one payload byte, recompute both checksums, write it back.
void forge_value(const RedisServers& redis, const std::string& key, std::size_t header_bytes) {
  RedisNode node(parse_redis_url(redis.urls()[0]), RedisNodeLimits{});
  const RedisCommand get{.args = {"GET", key}};
  auto got = node.pipeline(std::span(&get, 1));
  ASSERT_NE(got[0], nullptr);
  std::string value(got[0]->str, got[0]->len);
  kvtier::testing::forge_record(std::as_writable_bytes(std::span(value.data(), value.size())), header_bytes);
  const RedisCommand set{.args = {"SET", key, value}};
  auto stored = node.pipeline(std::span(&set, 1));
  ASSERT_NE(stored[0], nullptr);
}

// C2: flip a payload, recompute both checksums: 4,370 blocks fetched "verified".
TEST(SharedStoreHostile, AForgedValueIsServedWithoutAKeyAndRefusedWithOne) {
  RedisServers redis(1);
  KVTIER_REQUIRE_REDIS(redis);
  for (const bool keyed : {false, true}) {
    SharedStore writer(config(redis.urls(), keyed ? std::optional(key_of('k')) : std::nullopt), layout());
    ASSERT_EQ(publish(writer, 1, 4), 4U);
    const std::string key = writer.key(block(2).plh);
    forge_value(redis, key, 4096);
    SharedStore reader(config(redis.urls(), keyed ? std::optional(key_of('k')) : std::nullopt), layout());
    std::size_t wrong = 0;
    const std::size_t whole = fetch(reader, 1, 4, &wrong);
    if (!keyed) {
      EXPECT_EQ(wrong, 1U) << "the threat docs/shared-tier.md describes";
      continue;
    }
    EXPECT_EQ(wrong, 0U);
    EXPECT_EQ(whole, 3U);  // block 2 refused, the others served
    EXPECT_EQ(reader.stats().authentication_failures, 1U);
    EXPECT_EQ(reader.shared_stats().values_deleted, 1U);
    EXPECT_EQ(redis.cli(0, "EXISTS '" + key + "'"), "0");
  }
}

// H2: a 400 MB value (APPEND) errored every fetch, was never deleted, and RSS reached 833 MB.
TEST(SharedStoreHostile, AValueLongerThanABlocksIsRefusedUnreadAndDeleted) {
  RedisServers redis(1);
  KVTIER_REQUIRE_REDIS(redis);
  SharedStore store(config(redis.urls()), layout());
  ASSERT_EQ(publish(store, 1, 3), 3U);
  const std::string key = store.key(block(2).plh);
  ASSERT_EQ(redis.cli(0, "SETRANGE '" + key + "' 8000000 x"), "8000001");  // 8 MB now
  SharedStore reader(config(redis.urls()), layout());
  EXPECT_EQ(fetch(reader, 1, 3), 2U);  // block 2 refused, the others served
  EXPECT_EQ(reader.shared_stats().oversized, 1U);
  EXPECT_EQ(redis.cli(0, "EXISTS '" + key + "'"), "0");
  SharedStore again(config(redis.urls()), layout());
  EXPECT_EQ(publish(again, 2, 2), 1U);  // published again
  EXPECT_EQ(again.stats().blocks_written, 1U);
}

/// A "Redis" that answers the first command with a bulk reply it never ends.
class EndlessServer {
 public:
  EndlessServer() {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    socklen_t length = sizeof(address);
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    ::listen(listener_, 4);
    thread_ = std::thread([this] { serve(); });
  }
  ~EndlessServer() {
    stop_ = true;
    ::shutdown(listener_, SHUT_RDWR);
    ::close(listener_);
    thread_.join();
  }
  std::uint16_t port() const { return port_; }
  std::size_t sent() const { return sent_; }
  std::string header = "$1000000000\r\n";

 private:
  void serve() {
    const int client = ::accept(listener_, nullptr, nullptr);
    if (client < 0) return;
    char request[4096];
    (void)::recv(client, request, sizeof(request), 0);
    if (header.empty()) {  // silent: holds the connection, answers nothing
      while (!stop_) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      ::close(client);
      return;
    }
    (void)::send(client, header.data(), header.size(), MSG_NOSIGNAL);
    const std::vector<char> chunk(65536, 'x');
    const auto until = Clock::now() + std::chrono::seconds(20);
    while (!stop_ && Clock::now() < until) {
      const ssize_t n = ::send(client, chunk.data(), chunk.size(), MSG_NOSIGNAL);
      if (n <= 0) break;
      sent_ += static_cast<std::size_t>(n);
    }
    ::close(client);
  }
  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> sent_{0};
  std::thread thread_;
};

// H2: a fake server streaming one bulk reply held a connection 40 s while RSS grew to 724 MB.
TEST(SharedStoreHostile, AnEndlessReplyIsCutOffAtItsBoundAndDeadline) {
  for (const std::string header : {"$1000000000\r\n", "*2000000000\r\n"}) {
    EndlessServer server;
    server.header = header;
    RedisNode node(RedisEndpoint{.host = "127.0.0.1", .port = server.port()},
                   RedisNodeLimits{.timeout = std::chrono::milliseconds(2000),
                                   .retry_after = std::chrono::milliseconds(100),
                                   .max_reply_bytes = std::size_t{1} << 20});
    const RedisCommand get{.args = {"GET", "k"}};
    const auto start = Clock::now();
    const auto replies = node.pipeline(std::span(&get, 1), Clock::now() + std::chrono::seconds(5));
    EXPECT_EQ(replies[0], nullptr);
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(3)) << header;
    EXPECT_FALSE(node.last_error().empty());
    if (header.front() == '$') {
      EXPECT_NE(node.last_error().find("over 1048576 bytes"), std::string::npos) << node.last_error();
    }
  }
}

// L12: a node that answers nothing was "Resource temporarily unavailable".
TEST(SharedStoreHostile, ANodeThatNeverAnswersIsSaidToHaveTimedOut) {
  EndlessServer server;
  server.header = "";
  RedisNode node(RedisEndpoint{.host = "127.0.0.1", .port = server.port()},
                 RedisNodeLimits{.timeout = std::chrono::milliseconds(150)});
  const RedisCommand get{.args = {"GET", "k"}};
  EXPECT_EQ(node.pipeline(std::span(&get, 1))[0], nullptr);
  EXPECT_NE(node.last_error().find("no answer within 150 ms"), std::string::npos) << node.last_error();
}

// H3: `SET key ''` counted as "there already"; SET NX then never republished.
TEST(SharedStoreHostile, EmptyOrWrongTypeValuesAreReplacedNotTrusted) {
  RedisServers redis(1);
  KVTIER_REQUIRE_REDIS(redis);
  SharedStore probe(config(redis.urls()), layout());
  ASSERT_EQ(redis.cli(0, "SET '" + probe.key(block(1).plh) + "' ''"), "OK");
  ASSERT_EQ(redis.cli(0, "RPUSH '" + probe.key(block(2).plh) + "' a"), "1");
  SharedStore writer(config(redis.urls()), layout());
  EXPECT_EQ(publish(writer, 1, 3), 3U);
  EXPECT_EQ(writer.stats().blocks_written, 3U);  // the two poisoned keys were replaced, not taken as present
  EXPECT_EQ(writer.shared_stats().already_present, 0U);
  SharedStore reader(config(redis.urls()), layout());
  EXPECT_EQ(fetch(reader, 1, 3), 3U);
  // A list put there after publishing is refused by the lookup and removed.
  ASSERT_EQ(redis.cli(0, "DEL '" + probe.key(block(3).plh) + "'"), "1");
  ASSERT_EQ(redis.cli(0, "RPUSH '" + probe.key(block(3).plh) + "' a"), "1");
  SharedStore later(config(redis.urls()), layout());
  EXPECT_EQ(fetch(later, 1, 3), 2U);
  EXPECT_EQ(redis.cli(0, "EXISTS '" + probe.key(block(3).plh) + "'"), "0");
}

// L5: a value of another record format version was deleted.
TEST(SharedStoreHostile, AValueOfAnotherVersionIsKeptAndNotServed) {
  RedisServers redis(1);
  KVTIER_REQUIRE_REDIS(redis);
  SharedStore store(config(redis.urls()), layout());
  ASSERT_EQ(publish(store, 1, 2), 2U);
  const std::string key = store.key(block(1).plh);
  const std::string other_version(1, static_cast<char>(kRecordVersion + 1));
  ASSERT_EQ(redis.cli(0, "SETRANGE '" + key + "' 8 '" + other_version + "'"),
            std::to_string(4096 + store.page_bytes()));
  SharedStore reader(config(redis.urls()), layout());
  EXPECT_EQ(fetch(reader, 1, 2), 1U);  // block 2 only
  EXPECT_EQ(reader.shared_stats().other_version, 1U);
  EXPECT_EQ(redis.cli(0, "EXISTS '" + key + "'"), "1");
}

// L7: a namespace with a hash tag put every block on one shard.
TEST(SharedStoreHostile, ANamespaceWithAHashTagIsRefused) {
  SharedStoreConfig c = config({"redis://127.0.0.1:1"});
  c.key_namespace = "{hot}";
  EXPECT_THROW(SharedStore(c, layout()), ConfigError);
}

// L8: ASK redirections during a reshard were not followed.
TEST(SharedStoreHostile, AskRedirectionsOfASlotBeingMigratedAreFollowed) {
  RedisServers redis(3);
  KVTIER_REQUIRE_REDIS(redis);
  SharedStore store(config({redis.urls()[0]}), layout());
  ASSERT_EQ(publish(store, 1, 6), 6U);
  const std::string key = store.key(block(3).plh);
  const unsigned source = owner_of(redis, 3, key);
  ASSERT_LT(source, 3U);
  const unsigned target = (source + 1) % 3;
  const std::string slot = redis.cli(source, "CLUSTER KEYSLOT '" + key + "'");
  ASSERT_EQ(redis.cli(target, "CLUSTER SETSLOT " + slot + " IMPORTING " + redis.cli(source, "CLUSTER MYID")), "OK");
  ASSERT_EQ(redis.cli(source, "CLUSTER SETSLOT " + slot + " MIGRATING " + redis.cli(target, "CLUSTER MYID")), "OK");
  ASSERT_EQ(redis.cli(source, "MIGRATE 127.0.0.1 " + std::to_string(redis.port(target)) + " '" + key + "' 0 5000"),
            "OK");
  SharedStore reader(config({redis.urls()[0]}), layout());
  EXPECT_EQ(fetch(reader, 1, 6), 6U);
  EXPECT_GE(reader.shared_stats().redirections, 1U);
}

// L9: percent-encoded credentials, IPv6 hosts and a read-only ACL user failed.
TEST(SharedStoreHostile, EncodedPasswordsIpv6HostsAndReadOnlyUsersWork) {
  EXPECT_EQ(parse_redis_auth("redis://alice:p%40ss%3Aw%25rd@h:1"),
            (RedisAuth{.user = "alice", .password = "p@ss:w%rd"}));
  EXPECT_THROW((void)parse_redis_auth("redis://alice:100%@h:1"), ConfigError);
  EXPECT_EQ(parse_redis_url("redis://[::1]:7000"), (RedisEndpoint{.host = "::1", .port = 7000}));
  EXPECT_EQ((RedisEndpoint{.host = "::1", .port = 7000}).to_string(), "[::1]:7000");
  EXPECT_THROW((void)parse_redis_url("redis://::1:7000"), ConfigError);
  RedisServers redis(1);
  KVTIER_REQUIRE_REDIS(redis);
  ASSERT_EQ(redis.cli(0, "ACL SETUSER alice on '>p@ss:w%rd' '~*' '+@all'"), "OK");
  ASSERT_EQ(redis.cli(0, "ACL SETUSER reader on '>pw' '~*' '+@read'"), "OK");
  ASSERT_EQ(redis.cli(0, "CONFIG SET bind '127.0.0.1 ::1'"), "OK");
  const std::string port = std::to_string(redis.port(0));
  const std::vector<std::string> alice{"redis://alice:p%40ss%3Aw%25rd@[::1]:" + port};
  SharedStoreConfig as_alice = config(alice);
  as_alice.auth = redis_auth_of(alice);
  SharedStore writer(as_alice, layout());
  EXPECT_EQ(publish(writer, 1, 4), 4U);
  const std::vector<std::string> reader_url{"redis://reader:pw@127.0.0.1:" + port};
  SharedStoreConfig as_reader = config(reader_url);
  as_reader.auth = redis_auth_of(reader_url);
  SharedStore reader(as_reader, layout());
  EXPECT_EQ(fetch(reader, 1, 4), 4U);  // CLUSTER SLOTS refused (NOPERM): a single node serves
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(publish(reader, 5, 6), 0U);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("only reads"), std::string::npos);
  EXPECT_TRUE(reader.shared_stats().read_only);
  std::vector<g1::TieredBlock> none;
  EXPECT_EQ(reader.write(block(7), page_of(7, reader.page_bytes()), none), LowerTier::WriteStart::NoRoom);
}

// A publish frames SET around its value in place (one copy of the page fewer):
// the bytes sent are exactly what hiredis itself formats for the same arguments.
TEST(RespFraming, IsWhatHiredisFormatsForTheSameArguments) {
  const std::string value("binary\r\n\0value$*", 17);
  for (const bool ttl : {false, true}) {
    const std::vector<std::string_view> before{"SET", "ns:key"};
    std::vector<std::string_view> after{"NX"};
    if (ttl) after.insert(after.end(), {"EX", "3600"});
    const RespFraming framing = resp_framing(before, value.size(), after);
    const std::string framed = framing.head + value + framing.tail;
    std::vector<const char*> argv;
    std::vector<std::size_t> lengths;
    for (const std::string_view arg : before) argv.push_back(arg.data()), lengths.push_back(arg.size());
    argv.push_back(value.data());
    lengths.push_back(value.size());
    for (const std::string_view arg : after) argv.push_back(arg.data()), lengths.push_back(arg.size());
    char* formatted = nullptr;
    const long long bytes =
        redisFormatCommandArgv(&formatted, static_cast<int>(argv.size()), argv.data(), lengths.data());
    ASSERT_GT(bytes, 0);
    EXPECT_EQ(framed, std::string(formatted, static_cast<std::size_t>(bytes))) << "ttl " << ttl;
    redisFreeCommand(formatted);
  }
}

// A write the socket timeout cut short goes on from the byte it stopped at:
// pieces sent whole are skipped, the one it stopped in is cut, none is lost.
TEST(ConsumeSent, AWriteCutShortGoesOnFromTheByteItStoppedAt) {
  std::string a = "*3\r\n", b = "0123456789", c = "\r\n";
  std::vector<iovec> pieces{{a.data(), a.size()}, {b.data(), b.size()}, {c.data(), c.size()}};
  const auto rest = [&](std::size_t first) {
    std::string out;
    for (std::size_t i = first; i < pieces.size(); ++i)
      out.append(static_cast<char*>(pieces[i].iov_base), pieces[i].iov_len);
    return out;
  };
  std::size_t first = consume_sent(pieces, 0, 0);
  EXPECT_EQ(first, 0U);
  EXPECT_EQ(rest(first), "*3\r\n0123456789\r\n");
  first = consume_sent(pieces, first, 7);  // the first piece and 3 bytes of the second
  EXPECT_EQ(first, 1U);
  EXPECT_EQ(rest(first), "3456789\r\n");
  first = consume_sent(pieces, first, 7);  // exactly to the end of a piece
  EXPECT_EQ(first, 2U);
  EXPECT_EQ(rest(first), "\r\n");
  first = consume_sent(pieces, first, 2);
  EXPECT_EQ(first, pieces.size());
}

TEST(NodeBreaker, BacksOffDoublingAndLetsOneProbeThrough) {
  NodeBreaker breaker;
  const auto t0 = Clock::now();
  const auto ms = [](int n) { return std::chrono::milliseconds(n); };
  EXPECT_TRUE(breaker.allow(t0));
  breaker.failed(t0, ms(100));
  EXPECT_FALSE(breaker.allow(t0 + ms(99)));
  EXPECT_TRUE(breaker.allow(t0 + ms(100)));   // the probe
  EXPECT_FALSE(breaker.allow(t0 + ms(101)));  // the others miss while it runs
  breaker.failed(t0 + ms(300), ms(100));      // back-off 200 ms now
  EXPECT_FALSE(breaker.allow(t0 + ms(499)));
  EXPECT_TRUE(breaker.allow(t0 + ms(500)));
  breaker.succeeded();
  EXPECT_TRUE(breaker.allow(t0 + ms(500)));
  EXPECT_TRUE(breaker.allow(t0 + ms(500)));
  for (int i = 0; i < 40; ++i) breaker.failed(t0, ms(1000));
  EXPECT_TRUE(breaker.allow(t0 + NodeBreaker::kMaxBackoff));  // capped
}

// H1: with --instances 4, Redis stopped for 60 s made a 2.9 s replay take 61.7 s.
TEST(SharedStoreHostile, AStalledStoreCostsOneTimeoutPerBackOffNotOnePerLookup) {
  RedisServers redis(1);
  KVTIER_REQUIRE_REDIS(redis);
  std::vector<std::unique_ptr<SharedStore>> instances;
  for (int i = 0; i < 4; ++i) instances.push_back(std::make_unique<SharedStore>(config(redis.urls()), layout()));
  ASSERT_EQ(publish(*instances[0], 1, 4), 4U);
  ASSERT_TRUE(redis.signal(0, "STOP"));
  std::vector<PositionalLineageHash> wanted{block(1).plh, block(2).plh};
  Clock::duration waited{};
  std::size_t lookups = 0;
  const auto start = Clock::now();
  while (Clock::now() - start < std::chrono::seconds(3)) {
    for (auto& store : instances) {
      const auto before = Clock::now();
      (void)store->lookup(wanted);
      waited += Clock::now() - before;
      ++lookups;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(redis.signal(0, "CONT"));
  // Probes at about 0, 0.4, 1.0, 2.2 s (back-off 200 ms doubling), 200 ms each.
  EXPECT_LT(waited, std::chrono::milliseconds(1500)) << lookups << " lookups";
  EXPECT_GT(lookups, 100U);
  std::this_thread::sleep_for(std::chrono::milliseconds(1700));  // past the last back-off
  EXPECT_EQ(fetch(*instances[1], 1, 4), 4U);                     // the store serves again
}

}  // namespace
}  // namespace kvtier::tiers::shared
