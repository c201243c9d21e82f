// Reads an image that skopeo pulled into an OCI image layout:
//
//   skopeo copy docker://REF oci:LAYOUT:NAME --dest-shared-blob-dir BLOBS
//
// writes LAYOUT/index.json with an entry annotated org.opencontainers.image.ref.name=NAME and
// the blobs in BLOBS/sha256/<hex> (without --dest-shared-blob-dir: LAYOUT/blobs/sha256/<hex>).
// skopeo checks digests as it downloads, but the layout is read again here as hostile input:
// every JSON blob is size- and digest-checked, blob paths come from validated digests only, and
// no symlink is followed below the blob directory (openat2 RESOLVE_NO_SYMLINKS | BENEATH).
// Layers are only located (their size checked); applyLayer verifies their digests as it reads.
// Blocking file I/O: call it from a worker, not the event loop.
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "image/manifest.h"

namespace hutch::image {

struct LayerBlob {
  Descriptor descriptor;       // from the manifest; compression set
  std::filesystem::path path;  // BLOBS/sha256/<hex>; open it with openBlob, not by path
};

struct ResolvedImage {
  std::string manifest_digest;  // of the image manifest for the platform (not of the index)
  Manifest manifest;
  std::string config_digest;
  ImageConfig config;
  std::vector<LayerBlob> layers;    // base first, as many as config.diff_ids
  std::filesystem::path blob_root;  // the directory holding sha256/<hex>
};

// Resolves `ref_name` in the layout: the index.json entries annotated with it (when `ref_name`
// is empty, the only entry), followed through at most two nested indexes to the `want`
// platform's image manifest, then its config. Checks: every JSON blob's size equals its
// descriptor's and its digest matches; the manifest and config pass parseDocument/parseConfig
// under `limits` and checkConfig against `want`; each layer blob exists as a regular file of
// the descriptor's size.
// Errors: kNotFound (no index.json, no entry named `ref_name` — the message lists the names
// present —, a missing blob, no variant for `want`), kInvalidArgument (malformed JSON, size or
// digest mismatch, a blob that is not a regular file or reached through a symlink), and those of
// parseDocument/parseConfig/checkConfig.
Result<ResolvedImage> resolveLayout(const std::filesystem::path& layout_dir,
                                    const std::filesystem::path& blob_dir,
                                    std::string_view ref_name, const Limits& limits = {},
                                    const Platform& want = {"linux", "amd64", ""});

// Every blob the layout reaches from its index.json: the manifests and indexes it names (through
// at most two nested indexes), and each image's config and layers. A blob that is not in
// `blob_dir` is still listed (it is named) but not followed. kInvalidArgument (or the parse
// errors) when index.json or a present manifest or index cannot be read as one: then which blobs
// the layout needs is not known, and a caller removing blobs must remove none.
Result<std::set<std::string>> layoutBlobs(const std::filesystem::path& layout_dir,
                                          const std::filesystem::path& blob_dir,
                                          const Limits& limits = {});

// Opens the blob `digest` (validated) under `blob_root` (BLOBS, holding sha256/<hex>) for
// reading: a regular file reached without any symlink. kInvalidArgument for a bad digest or a
// non-regular file, kNotFound when missing.
Result<UniqueFd> openBlob(const std::filesystem::path& blob_root, std::string_view digest);

}  // namespace hutch::image
