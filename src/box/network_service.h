// NetworkService: every box's wall (docs/network.md). For each VM hutchd launches it makes a
// network namespace with a tap and no route (net::BoxNetworks); for each running box it hands
// the sockets made inside that namespace, the box's egress policy, its secrets and its CA to
// hutch-egress, the unprivileged process that resolves, proxies, decides and logs
// (src/egress/README.md). It keeps hutch-egress running (a new one gets every box again) and
// writes what it reports into each box's policy log.
//
// Runs on the daemon's loop; prepare() and release() block (ip, nft) and belong on the pool.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on

#include <sys/types.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "box/box.h"
#include "box/box_agent.h"
#include "egress/log_entry.h"
#include "egress/policy.h"
#include "egress/registries.h"
#include "net/box_net.h"
#include "net/secrets.h"
#include "observe/metrics.h"

namespace hutch::box {

// A per-box CA: PEM certificate and key.
struct CaPem {
  std::string cert;
  std::string key;
};

struct NetworkConfig {
  std::filesystem::path egress_binary;  // hutch-egress
  std::filesystem::path state_dir;      // <state>/egress: <box>/ca.{crt,key}, logs/<box>.ndjson
  std::optional<std::pair<uid_t, gid_t>> egress_user;  // who hutch-egress runs as
  std::filesystem::path upstream_ca;    // extra roots hutch-egress trusts upstream (tests)
  std::filesystem::path resolv_conf;    // where hutch-egress finds its nameservers; empty: default
  std::string default_policy = "none";  // a preset or JSON, for templates without their own
  std::filesystem::path etc_apt = "/etc/apt";  // for the debian-mirrors preset
  // Makes a box's CA (egress::makeBoxCa in hutchd).
  std::function<Result<CaPem>(const std::string& box_id)> make_ca;
};

class NetworkService {
 public:
  NetworkService(boost::asio::any_io_executor loop, net::BoxNetworks networks,
                 net::SecretStore& secrets, NetworkConfig config);
  ~NetworkService();
  NetworkService(const NetworkService&) = delete;
  NetworkService& operator=(const NetworkService&) = delete;

  // Starts hutch-egress (and restarts it whenever it dies, until stop()).
  Result<> start();
  void stop();

  // The egress policy a new box gets: `requested` (a preset or JSON), else the template's
  // network-policy.json, else the daemon's default. Returns egress::toJson text.
  Result<std::string> policyFor(const std::string& requested,
                                const std::filesystem::path& template_dir) const;
  // Placeholders for the named secrets, each of which must exist.
  Result<std::vector<BoxSecret>> secretsFor(const std::vector<std::string>& names,
                                            const std::string& owner_id) const;
  // NAME=placeholder for the box's environment.
  static std::vector<std::string> environment(const Box& box);
  // The npmrc and pip.conf the box gets: the host's registries its policy lets it reach
  // (egress::boxRegistryFiles). Empty where the host has no npm or pip, or the policy allows
  // none of their registries.
  static egress::BoxRegistryFiles registryFiles(const Box& box);

  std::filesystem::path netnsPath(uint32_t index) const { return networks_.pathFor(index); }
  // Blocking. A namespace made afresh for the VM of uid index `index`; its path for VmSpec.
  Result<std::filesystem::path> prepare(uint32_t index) const;
  // Blocking. The namespace of `index` goes (its VM is gone).
  void release(uint32_t index) const;
  // Namespaces of indices not in `keep` go (after a restart).
  void removeOrphans(const std::vector<uint32_t>& keep) const;
  static void setGuestParams(std::map<std::string, std::string>& params);
  // What snapshot manifests record about the NIC.
  static std::string snapshotNetwork();

  // The running box `box` gets its sockets, policy, secrets and CA served by hutch-egress.
  Result<> attach(const Box& box);
  // A live policy change (the box's record holds the new policy already).
  Result<> updatePolicy(const Box& box);
  // The box no longer runs: its sockets and connections close.
  void detach(const std::string& box_id);
  // The box is gone: its CA and policy log go too.
  void forget(const std::string& box_id);
  // forget() for every box with files here that is not in `known` (what an rm cut short by a
  // crash of hutchd left).
  void forgetAllBut(const std::set<std::string>& known);
  // A fork's child gets its parent's CA (the parent's trust store is on its disk).
  Result<> inheritCa(const std::string& parent_id, const std::string& child_id);
  // The box's CA certificate (made if missing), to install in its trust store.
  Result<std::string> caCert(const std::string& box_id);

  // Where refused connections (events), secret uses (audit) and egress counts (metrics) go
  // (docs/observability.md); set before start(), they must outlive the service.
  void setActivity(ActivitySinks sinks, observe::Metrics* metrics) {
    activity_ = sinks;
    metrics_ = metrics;
  }

  // The policy log of a box: entries after line `after` (0: from the start), at most `limit`.
  struct LogPage {
    std::vector<nlohmann::json> entries;
    uint64_t next = 0;  // pass as `after` to get what came later
  };
  Result<LogPage> log(const std::string& box_id, uint64_t after, size_t limit) const;

 private:
  struct Attached;
  class Link;
  Result<CaPem> boxCa(const std::string& box_id);
  Result<nlohmann::json> boxMessage(const Box& box);
  void onEvent(const nlohmann::json& event);
  void onLinkDown(const std::string& why);
  boost::asio::awaitable<void> restartLater();
  Result<> spawnEgress();
  void appendLog(const egress::LogEntry& entry);
  // A policy log entry from hutch-egress: metrics, and (rate limited per box) an
  // egress.refused event; an audit record for each use of a secret.
  void report(const nlohmann::json& entry);
  std::filesystem::path logPath(const std::string& box_id) const;
  std::filesystem::path caDir(const std::string& box_id) const;

  boost::asio::any_io_executor loop_;
  net::BoxNetworks networks_;
  net::SecretStore& secrets_;
  NetworkConfig config_;
  std::shared_ptr<Link> link_;
  pid_t egress_pid_ = -1;
  bool stopping_ = false;
  bool restart_pending_ = false;
  std::map<std::string, std::unique_ptr<Attached>> attached_;  // by box id
  ActivitySinks activity_;
  observe::Metrics* metrics_ = nullptr;
};

}  // namespace hutch::box
