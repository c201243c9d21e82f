// The JSON documents of an OCI or Docker image: indexes (manifest lists), image manifests and
// image configs (OCI image-spec index.md, manifest.md, config.md; Docker "Image Manifest V2,
// Schema 2"). Everything here comes from a registry and is hostile: every field is checked for
// type and range, sizes are bounded by Limits, and what hutch cannot run is refused with a
// message that names it. Pure functions; no I/O.
//
//   HUTCH_TRY(MediaDocument doc, parseDocument(bytes, descriptor.media_type));
//   if (auto* index = std::get_if<Index>(&doc)) { HUTCH_TRY(Descriptor d, selectPlatform(*index));
//   }
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/result.h"
#include "image/digest.h"

namespace hutch::image {

namespace media {
inline constexpr std::string_view kOciIndex = "application/vnd.oci.image.index.v1+json";
inline constexpr std::string_view kOciManifest = "application/vnd.oci.image.manifest.v1+json";
inline constexpr std::string_view kOciConfig = "application/vnd.oci.image.config.v1+json";
inline constexpr std::string_view kOciLayer = "application/vnd.oci.image.layer.v1.tar";
inline constexpr std::string_view kOciLayerGzip = "application/vnd.oci.image.layer.v1.tar+gzip";
inline constexpr std::string_view kOciLayerZstd = "application/vnd.oci.image.layer.v1.tar+zstd";
inline constexpr std::string_view kDockerList =
    "application/vnd.docker.distribution.manifest.list.v2+json";
inline constexpr std::string_view kDockerManifest =
    "application/vnd.docker.distribution.manifest.v2+json";
inline constexpr std::string_view kDockerConfig = "application/vnd.docker.container.image.v1+json";
inline constexpr std::string_view kDockerLayerGzip =
    "application/vnd.docker.image.rootfs.diff.tar.gzip";
}  // namespace media

// What the parsers accept. The defaults fit any real image; the caller may lower them.
struct Limits {
  size_t max_document_bytes = 4 << 20;                  // one index, manifest or config
  size_t max_index_entries = 1024;                      // manifests listed by one index
  size_t max_layers = 256;                              // layers of one image
  uint64_t max_total_layer_bytes = uint64_t{16} << 30;  // compressed, summed over the layers
};

struct Platform {
  std::string os;            // "linux"
  std::string architecture;  // "amd64", "arm64"
  std::string variant;       // "v8", or empty

  // "linux/arm64/v8", "linux/amd64".
  std::string str() const;
  bool operator==(const Platform&) const = default;
};

enum class Compression { kNone, kGzip, kZstd };

struct Descriptor {
  std::string media_type;
  std::string digest;  // always a valid sha256 digest (isValidDigest)
  int64_t size = 0;    // always >= 0
  std::optional<Platform> platform;
  std::map<std::string, std::string> annotations;
  // Layers only (Manifest::layers): how the blob is compressed, from media_type.
  Compression compression = Compression::kNone;

  bool operator==(const Descriptor&) const = default;
};

// An OCI image index or a Docker manifest list.
struct Index {
  std::string media_type;
  std::vector<Descriptor> manifests;
  bool operator==(const Index&) const = default;
};

// An OCI image manifest or a Docker schema 2 manifest.
struct Manifest {
  std::string media_type;
  Descriptor config;
  std::vector<Descriptor> layers;  // base layer first
  bool operator==(const Manifest&) const = default;
};

using MediaDocument = std::variant<Index, Manifest>;

// What an image asks of the process it runs (the "config" object of the image config) and the
// uncompressed digests of its layers.
struct ImageConfig {
  std::string os;
  std::string architecture;
  std::string variant;
  std::vector<std::string> env;  // "K=V"
  std::string working_dir;
  std::string user;
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
  std::vector<std::string> exposed_ports;  // "80/tcp", sorted
  std::map<std::string, std::string> labels;
  std::string stop_signal;
  std::vector<std::string> diff_ids;  // sha256 of each layer's uncompressed tar, base first

  bool operator==(const ImageConfig&) const = default;
};

// Parses an index or an image manifest. `media_type_hint` is the media type of the descriptor
// (or HTTP Content-Type) that led to it, or empty. The document's own "mediaType" wins when the
// hint is empty; when both are given they must agree. Without either, the shape decides
// ("manifests" -> index; "config" and "layers" -> manifest).
// Errors: kResourceExhausted (larger than limits.max_document_bytes, more entries or layers than
// allowed, layers summing over max_total_layer_bytes); kUnsupported (Docker schema 1, an unknown
// media type, a config that is not a container image config, foreign or non-distributable layers
// or an unknown layer type, named in the message); kInvalidArgument (not JSON, wrong field
// types, malformed digests, negative sizes, schemaVersion other than 2).
Result<MediaDocument> parseDocument(std::string_view json, std::string_view media_type_hint,
                                    const Limits& limits = {});

// The compression of a layer of this media type; kUnsupported for foreign/non-distributable
// layers and unknown types.
Result<Compression> layerCompression(std::string_view media_type);

// The index entry for `want`. os and architecture must match; when want.variant is empty the
// entry without a variant is preferred, else the first match; a given variant must match
// exactly. Entries that are not image manifests (attestations, nested indexes) are skipped. An
// index of exactly one image manifest without a platform yields that one (the config's platform
// is checked later). kNotFound lists what the index offers: "The image has no linux/amd64
// variant; it offers linux/arm64/v8, linux/s390x".
Result<Descriptor> selectPlatform(const Index& index,
                                  const Platform& want = {"linux", "amd64", ""});

// Parses an image config. kInvalidArgument for wrong types, missing os/architecture/rootfs,
// rootfs.type other than "layers", malformed diff_ids; kResourceExhausted when larger than
// limits.max_document_bytes or with more diff_ids than limits.max_layers.
Result<ImageConfig> parseConfig(std::string_view json, const Limits& limits = {});

// Checks that `config` belongs to `manifest` and runs on `want`: as many diff_ids as layers
// (kInvalidArgument), the config's os/architecture are want's (kUnsupported).
Result<> checkConfig(const Manifest& manifest, const ImageConfig& config,
                     const Platform& want = {"linux", "amd64", ""});

}  // namespace hutch::image
