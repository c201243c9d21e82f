// Image references as `docker pull` reads them ("python:3.12", "ghcr.io/o/r@sha256:…"),
// normalized like Docker's distribution/reference (ParseNormalizedNamed):
//
//   python                      -> docker.io/library/python:latest
//   user/app:1                  -> docker.io/user/app:1
//   localhost:5000/app          -> localhost:5000/app:latest
//   [::1]:5000/app@sha256:<hex> -> [::1]:5000/app@sha256:<hex>   (no tag: the digest pins it)
//   ghcr.io/o/r:v@sha256:<hex>  -> both kept; the digest is what is pulled
//
// The first path component is a registry host[:port] when it contains '.' or ':', is
// "localhost", or has an uppercase letter (Docker's rule); otherwise the registry is docker.io
// ("index.docker.io" is spelled docker.io). Pure functions; no I/O.
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"

namespace hutch::image {

struct Reference {
  std::string registry;    // "docker.io", "ghcr.io", "localhost:5000", "[::1]:5000"
  std::string repository;  // "library/python": lowercase components separated by '/'
  std::string tag;         // "3.12"; "latest" when neither tag nor digest was given
  std::string digest;      // "sha256:<64 hex>" or empty

  // The canonical form: "docker.io/library/python:3.12", "r/x@sha256:…", "r/x:t@sha256:…".
  std::string str() const;
  // "docker://" + str(), what skopeo copy takes as a source.
  std::string transport() const;

  bool operator==(const Reference&) const = default;
};

// Parses and normalizes `text`. kInvalidArgument, with what is wrong and how to write it, for:
// an empty name, uppercase or otherwise invalid repository components, a name longer than 255
// characters, a malformed registry host or port, a tag outside [A-Za-z0-9_][A-Za-z0-9_.-]{0,127},
// a digest that is not sha256:<64 lowercase hex> (other algorithms are not supported).
Result<Reference> parseReference(std::string_view text);

// True when the registry is this host: "localhost", 127.0.0.0/8 or [::1], with any port.
// (Such registries are reached over plain HTTP by skopeo when told to; others never are.)
bool isLoopbackRegistry(const Reference& ref);

}  // namespace hutch::image
