// Named network namespaces (the `ip netns` convention: a bind mount under /run/netns) and doing
// work inside one. Blocking: call from the worker pool.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace hutch::net {

// /run/netns/<name>
std::filesystem::path netnsPath(const std::string& name);

// Runs fn on a new thread that has entered the namespace at `netns` (setns affects only the
// calling thread, so hutchd's own threads never leave the host namespace). Sockets made in fn
// stay in that namespace for their whole life; processes spawned from fn start in it.
Result<> inNetns(const std::filesystem::path& netns, const std::function<Result<>()>& fn);

// Opens the existing tap device `name` in `netns` (IFF_TAP | IFF_NO_PI | IFF_VNET_HDR): the
// descriptor QEMU's `-netdev tap,fd=N` takes. The opener needs CAP_NET_ADMIN in the namespace;
// the holder of the descriptor needs nothing.
Result<UniqueFd> openTap(const std::filesystem::path& netns, const std::string& name);

// Creates an empty named namespace (lo down, no other device); kAlreadyExists if it exists.
Result<> createNetns(const std::string& name);
// Deletes it; a namespace that does not exist is not an error.
Result<> deleteNetns(const std::string& name);
// The names under /run/netns that start with `prefix`.
std::vector<std::string> listNetns(const std::string& prefix);

}  // namespace hutch::net
