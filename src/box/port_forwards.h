// PortForwards: published ports. Each forward of a running box has a listener on the host (an
// Asio acceptor on the daemon's loop); every connection it accepts becomes a TCP stream the
// box's agent opens to the box port inside the box (AgentClient::connect), relayed both ways
// with back-pressure and half-close. No network between host and box is involved.
//
// Forwards are stored per box and follow its life (as a BoxObserver): listeners open when the
// box becomes running (create, start, rollback, and for every running box after a hutchd
// restart: openRunning) and close when it stops, fails or is removed; removing the box deletes
// its forwards. A fork does not inherit its parent's forwards (the host ports are taken).
// A suspend keeps the open connections (BoxService parks their agent streams): the listener
// closes, its parked connections wait and go on when the box is resumed.
// Single-threaded: everything runs on the daemon's loop.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on

#include <boost/asio/any_io_executor.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "box/box_service.h"
#include "box/port_forward.h"
#include "storage/box_store.h"

namespace hutch::box {

class PortForwards : public BoxObserver {
 public:
  PortForwards(boost::asio::any_io_executor loop, storage::BoxStore& store, BoxService& service);
  ~PortForwards() override;
  PortForwards(const PortForwards&) = delete;
  PortForwards& operator=(const PortForwards&) = delete;

  // Publishes a port of box `box_key`. The host endpoint is bound at once (also for a box that
  // is not running: the bind is only tried then, so that a port in use is an error now, not at
  // the next start). kAlreadyExists "Port 8080 on 127.0.0.1 is in use on the host" or already
  // published by a box; nothing is recorded on error.
  Result<PortStatus> add(const std::string& box_key, PortForward forward);
  Result<std::vector<PortStatus>> list(const std::string& box_key);
  // Unpublishes host_port (on `address`, or every address if empty); open connections through
  // it are closed.
  Result<> remove(const std::string& box_key, uint16_t host_port, const std::string& address);

  // Opens the listeners of every running box (after a hutchd restart adopted them).
  void openRunning();
  // Closes every listener and connection (daemon shutdown).
  void closeAll();

  // BoxObserver
  void boxStateChanged(const Box& box) override;
  void boxRemoved(const std::string& box_id) override;
  size_t openConnections(const std::string& box_id) const override;

  class Listener;

 private:
  using Key = std::pair<std::string, uint16_t>;  // host address, host port
  static Key keyOf(const PortForward& f) { return {f.host_address, f.host_port}; }

  bool listensFor(const Box& box) const;
  // port.published / port.unpublished (docs/observability.md).
  void report(const char* type, const Box& box, const PortForward& f) const;
  void openFor(const std::string& box_id);
  void closeFor(const std::string& box_id);
  PortStatus statusOf(const PortForward& forward) const;

  boost::asio::any_io_executor loop_;
  storage::BoxStore& store_;
  BoxService& service_;
  std::map<Key, std::shared_ptr<Listener>> listeners_;
  std::map<Key, std::string> errors_;  // forwards of running boxes whose bind failed
  // Closed listeners whose connections were parked across their box's suspend, by box id.
  std::multimap<std::string, std::shared_ptr<Listener>> retired_;
};

}  // namespace hutch::box
