#pragma once
// Real redis-server processes for one test, on 127.0.0.1 only, started and
// stopped (by PID) with scripts/redis-cluster.sh: one node, or a Redis
// Cluster of N masters. Ports come from the process id, so parallel ctest
// runs never share one. Without redis-server on PATH the test is skipped.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace kvtier::testing {

class RedisServers {
 public:
  static bool available() { return std::system("command -v redis-server >/dev/null 2>&1") == 0; }

  /// Starts `nodes` nodes (a cluster when > 1); `ok()` says whether they run.
  explicit RedisServers(unsigned nodes, const std::string& maxmemory = "256mb")
      : nodes_(nodes), base_port_(12000 + static_cast<unsigned>(::getpid() % 1000) * 16) {
    dir_ = std::filesystem::temp_directory_path() / ("kvtier-redis-test-" + std::to_string(::getpid()));
    const std::filesystem::path out = dir_.string() + ".urls";
    ok_ = run("start " + std::to_string(nodes_) + " " + std::to_string(base_port_) + " " + maxmemory + " > " +
              out.string());
    std::ifstream in(out);
    std::string line;
    std::getline(in, line);
    std::stringstream urls(line);
    for (std::string url; std::getline(urls, url, ',');) urls_.push_back(url);
    std::filesystem::remove(out);
    ok_ = ok_ && urls_.size() == nodes_;
  }
  ~RedisServers() { run("stop " + std::to_string(nodes_) + " " + std::to_string(base_port_)); }
  RedisServers(const RedisServers&) = delete;
  RedisServers& operator=(const RedisServers&) = delete;

  bool ok() const noexcept { return ok_; }
  const std::vector<std::string>& urls() const noexcept { return urls_; }
  unsigned port(unsigned node) const noexcept { return base_port_ + node; }
  /// SIGKILL: a shard that crashed.
  bool kill(unsigned node) { return run("kill " + std::to_string(port(node))); }
  /// Sends a signal (STOP, CONT, ...) to one node.
  bool signal(unsigned node, const std::string& name) const {
    return std::system(
               ("kill -" + name + " $(cat " + (dir_ / (std::to_string(port(node)) + ".pid")).string() + ")").c_str()) ==
           0;
  }
  /// A redis-cli command on one node; its output.
  std::string cli(unsigned node, const std::string& args) const {
    const std::string command = "redis-cli -h 127.0.0.1 -p " + std::to_string(port(node)) + " " + args + " 2>&1";
    std::string out;
    if (FILE* pipe = ::popen(command.c_str(), "r")) {
      char buffer[4096];
      for (std::size_t n; (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;) out.append(buffer, n);
      ::pclose(pipe);
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out;
  }
  /// Keys the node holds.
  long keys(unsigned node) const {
    const std::string n = cli(node, "dbsize");
    return n.empty() ? -1 : std::strtol(n.c_str(), nullptr, 10);
  }
  /// Restarts one stopped single node, empty (a standalone node only).
  bool restart_single(const std::string& maxmemory = "256mb") {
    return run("start 1 " + std::to_string(base_port_) + " " + maxmemory + " > /dev/null");
  }

 private:
  bool run(const std::string& args) const {
    const std::string command = "KVTIER_REDIS_DIR=" + dir_.string() + " bash " KVTIER_REDIS_SCRIPT " " + args;
    return std::system(command.c_str()) == 0;
  }

  unsigned nodes_;
  unsigned base_port_;
  std::filesystem::path dir_;
  std::vector<std::string> urls_;
  bool ok_ = false;
};

/// Skips the test without redis-server; fails it when the servers did not start.
#define KVTIER_REQUIRE_REDIS(servers)                                                     \
  do {                                                                                    \
    if (!::kvtier::testing::RedisServers::available()) GTEST_SKIP() << "no redis-server"; \
    ASSERT_TRUE((servers).ok()) << "redis-server did not start";                          \
  } while (0)

}  // namespace kvtier::testing
