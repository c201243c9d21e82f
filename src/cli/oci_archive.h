// `hutch image load`'s look at an image archive before it reaches `docker load` in the box.
// Debian 12's Docker (20.10) loads only `docker save` archives (a manifest.json at the top); an
// OCI image layout (index.json, oci-layout, blobs/<alg>/<hex>) is turned into one on the fly: the
// same blobs plus a manifest.json made from index.json and the image manifests it points to.
// The tar is read by image/image_archive.h (openTar, scanImageArchive), as hutchd reads the
// archives of `hutch template create --from-archive`.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"

namespace hutch::cli {

// One image of a docker-save manifest.json.
struct DockerImageEntry {
  std::string config;                  // "blobs/sha256/<hex>"
  std::vector<std::string> repo_tags;  // "name:tag"; empty: docker loads it untagged
  std::vector<std::string> layers;     // "blobs/sha256/<hex>", base layer first

  bool operator==(const DockerImageEntry&) const = default;
};

struct ImageArchive {
  enum class Format { kDockerSave, kOciLayout };
  Format format = Format::kDockerSave;
  std::vector<DockerImageEntry> images;  // kOciLayout: what manifest.json will hold
};

// Reads the whole archive behind `fd` (seekable; read from offset 0) once: a tar, plain or
// compressed (gzip, xz, bzip2, zstd). `name` is for messages. A docker-save archive is taken as it
// is (docker load checks it); an OCI layout is resolved to the images to load: each entry of
// index.json (a nested index is followed once; of several platforms linux/amd64 is chosen), tagged
// from its org.opencontainers.image.ref.name annotation ("name:tag", or "oci-image:TAG" when it
// is a tag alone). Errors (kInvalidArgument): not a tar, neither manifest.json nor index.json,
// malformed JSON, no linux/amd64 image, a blob the layout lacks.
Result<ImageArchive> inspectImageArchive(int fd, const std::string& name);

// The manifest.json text docker load reads for `images`.
std::string dockerManifestJson(const std::vector<DockerImageEntry>& images);

// Writes the OCI layout behind `fd` (read from offset 0) to `out` as an uncompressed
// docker-save tar: manifest.json first, then the config and layer blobs `images` name (other
// platforms' blobs are left out).
Result<> writeDockerArchive(int fd, const std::vector<DockerImageEntry>& images, int out);

}  // namespace hutch::cli
