// Image archives: a `docker save` tar (manifest.json at its root) or an OCI image layout as a
// tar (skopeo's "oci-archive": oci-layout and index.json at its root, blobs/sha256/<hex>), plain
// or compressed (gzip, zstd, xz, bzip2). hutchd makes templates of them (`hutch template create
// NAME --from-archive FILE|DIR|-`, docs/templates.md "Archives"); the CLI's `hutch image load`
// reads them too (cli/oci_archive.h).
//
// An archive is hostile input. It is read here in one pass with libarchive and never unpacked:
// names are normalised, entries that are not files, directories or (docker save only) symlinks
// inside the archive are refused, every blobs/sha256/<hex> file can be hashed against its name,
// JSON documents are kept in memory only up to a budget, and the whole is bounded in entries
// and bytes. listArchiveImages and checkArchiveImage then read what the archive says with the
// parsers of manifest.h, so that what skopeo is given (archiveSource) is known to be one whole
// linux/amd64 image whose blobs are all there and all what their digests say. Blocking file
// reads: call it from a worker, not the event loop.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "image/manifest.h"

struct archive;  // libarchive's reader

namespace hutch::image {

struct TarReaderFree {
  void operator()(archive* a) const;
};
using TarReader = std::unique_ptr<archive, TarReaderFree>;

// A libarchive reader of the tar behind `fd` (read from offset 0), plain or compressed.
// kInvalidArgument naming `name` when it is not a tar.
Result<TarReader> openTar(int fd, const std::string& name);

// libarchive's last error on `a`, or a generic text.
std::string tarError(archive* a);

// "./blobs/sha256/x" -> "blobs/sha256/x" (leading "./" dropped, nothing else changed).
std::string normalTarName(const char* raw);

struct ArchiveScanOptions {
  size_t max_document_bytes = size_t{4} << 20;    // one JSON document kept in memory
  size_t max_documents_bytes = size_t{64} << 20;  // all of them
  uint64_t max_entries = 100'000;
  uint64_t max_total_bytes = uint64_t{64} << 30;  // the entries' sizes, summed (unpacked)
  // Hash every blobs/sha256/<hex> file and compare it with its name (ArchiveScan::mismatched).
  bool verify_blobs = false;
};

// What one pass over an archive saw.
struct ArchiveScan {
  std::map<std::string, uint64_t> files;  // regular files by normalised name, with their sizes
  // index.json, manifest.json and every other file that looks like JSON (starts with '{' or
  // '['), up to max_document_bytes: manifests, indexes and configs, never layers.
  std::map<std::string, std::string> documents;
  std::map<std::string, std::string> symlinks;  // name -> target, as written
  std::vector<std::string> others;              // "NAME (a hard link)": entries of any other type
  std::vector<std::string> unsafe;              // names that are absolute or have a ".." component
  std::vector<std::string> mismatched;  // "blobs/sha256/<hex>" holding other bytes (verify_blobs)
};

// Reads the whole archive behind `fd` once. `name` is for messages ("the archive", a file's
// path). kInvalidArgument: not a tar, damaged or truncated; kResourceExhausted: past a limit of
// `options` (named).
Result<ArchiveScan> scanImageArchive(int fd, const std::string& name,
                                     const ArchiveScanOptions& options = {});

enum class ArchiveFormat { kDockerArchive, kOciArchive };
// skopeo's transport: "docker-archive", "oci-archive".
std::string_view transportName(ArchiveFormat format);

struct ArchivedImage {
  size_t index = 0;                // its position in manifest.json or index.json
  std::vector<std::string> names;  // docker save: its RepoTags; OCI: its ref.name annotation
  std::string digest;  // OCI: its index.json descriptor's; docker save: its config's (image ID)
  // "busybox:latest (sha256:0123456789ab)", "untagged (sha256:...)": for messages.
  std::string describe() const;
};

struct ArchiveListing {
  ArchiveFormat format = ArchiveFormat::kDockerArchive;
  std::vector<ArchivedImage> images;
};

// The images the archive lists, by content: manifest.json makes it a `docker save` archive
// (Docker 25's, which also has an OCI index.json, included), index.json an OCI one. Refuses
// (kInvalidArgument, naming the entry) unsafe names, entries other than files and directories
// (and symlinks in a docker save archive, whose reader follows them inside the archive only),
// blobs that do not hash to their names, neither file, malformed JSON, an empty list.
Result<ArchiveListing> listArchiveImages(const ArchiveScan& scan, const std::string& name);

// The image `want` names: a docker save RepoTag or an OCI ref.name, compared as image references
// ("busybox" is "docker.io/library/busybox:latest") or exactly; "@N" for the N-th (from 0).
// Empty `want`: the archive's only image. kNotFound lists what the archive holds when nothing or
// more than one image matches.
Result<ArchivedImage> chooseArchiveImage(const ArchiveListing& listing, std::string_view want,
                                         const std::string& name);

// Checks `image` as skopeo will copy it: its manifest (OCI; an index is narrowed to
// linux/amd64 as from a registry) or manifest.json entry (docker save), its config (linux/amd64,
// as many diff_ids as layers) and every layer present with the size its descriptor gives, under
// `limits`. Errors as parseDocument, parseConfig, selectPlatform and checkConfig give them, and
// kInvalidArgument for a missing or oversized blob, naming it.
Result<> checkArchiveImage(const ArchiveScan& scan, const ArchiveListing& listing,
                           const ArchivedImage& image, const std::string& name,
                           const Limits& limits = {});

// skopeo's source for `image` in the archive saved at `file` (a path without ':'):
// "docker-archive:FILE:@N"; "oci-archive:FILE:REFNAME", or "oci-archive:FILE" for the only image
// of an index. kInvalidArgument when skopeo cannot name it: an OCI image without a ref.name among
// several, or a ref.name that several images share.
Result<std::string> archiveSource(const ArchiveListing& listing, const ArchivedImage& image,
                                  const std::filesystem::path& file);

}  // namespace hutch::image
