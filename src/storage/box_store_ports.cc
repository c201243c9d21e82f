// BoxStore: published ports (the `ports` table).
#include <fmt/format.h>

#include "storage/box_store.h"

namespace hutch::storage {

namespace {

constexpr const char* kPortColumns = "box_id, host_address, host_port, box_port, created_at";

Result<std::vector<box::PortForward>> readPorts(Statement& st) {
  std::vector<box::PortForward> out;
  while (true) {
    HUTCH_TRY(bool row, st.step());
    if (!row) break;
    box::PortForward p;
    p.box_id = st.columnText(0);
    p.host_address = st.columnText(1);
    p.host_port = static_cast<uint16_t>(st.columnInt(2));
    p.box_port = static_cast<uint16_t>(st.columnInt(3));
    p.created_at = st.columnInt(4);
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

Result<> BoxStore::insertPort(const box::PortForward& forward) {
  HUTCH_TRY(std::vector<box::PortForward> all, allPorts());
  for (const box::PortForward& other : all) {
    if (!box::sameHostPort(other, forward)) continue;
    auto owner = find(other.box_id);
    std::string who = owner ? fmt::format("box {} ({})", owner->name, box::stateName(owner->state))
                            : "box " + other.box_id;
    return fail(Errc::kAlreadyExists,
                fmt::format("Port {} is already published by {} (as {}); choose another host "
                            "port or remove that one with 'hutch port rm'",
                            forward.host_port, who, box::hostEndpoint(other)));
  }
  HUTCH_TRY(Statement st,
            db_.prepare(fmt::format("INSERT INTO ports ({}) VALUES (?,?,?,?,?)", kPortColumns)));
  st.bind(1, forward.box_id)
      .bind(2, forward.host_address)
      .bind(3, static_cast<int64_t>(forward.host_port))
      .bind(4, static_cast<int64_t>(forward.box_port))
      .bind(5, forward.created_at);
  return st.run();
}

Result<> BoxStore::removePort(const std::string& box_id, uint16_t host_port,
                              const std::string& address) {
  HUTCH_TRY(Statement st, db_.prepare("DELETE FROM ports WHERE box_id=?1 AND host_port=?2 AND "
                                      "(?3 = '' OR host_address=?3)"));
  st.bind(1, box_id).bind(2, static_cast<int64_t>(host_port)).bind(3, address);
  HUTCH_TRY_VOID(st.run());
  if (db_.changes() == 0) {
    return fail(Errc::kNotFound,
                fmt::format("The box publishes no port {}{} (see 'hutch port ls BOX')", host_port,
                            address.empty() ? "" : " on " + address));
  }
  return ok();
}

Result<> BoxStore::removePorts(const std::string& box_id) {
  HUTCH_TRY(Statement st, db_.prepare("DELETE FROM ports WHERE box_id=?"));
  st.bind(1, box_id);
  return st.run();
}

Result<std::vector<box::PortForward>> BoxStore::ports(const std::string& box_id) {
  HUTCH_TRY(Statement st,
            db_.prepare(fmt::format("SELECT {} FROM ports WHERE box_id=? ORDER BY host_port, "
                                    "host_address",
                                    kPortColumns)));
  st.bind(1, box_id);
  return readPorts(st);
}

Result<std::vector<box::PortForward>> BoxStore::allPorts() {
  HUTCH_TRY(Statement st, db_.prepare(fmt::format("SELECT {} FROM ports ORDER BY box_id, host_port",
                                                  kPortColumns)));
  return readPorts(st);
}

}  // namespace hutch::storage
