// Template-from-image parsers (src/image/): an index, manifest or config as a registry sends it,
// and an image reference as a user types it. The first byte picks the media type the document is
// announced as; the rest is the document. Whatever parses must keep the parsers' promises
// (valid digests, sizes in range, limits held).
#include <cstdlib>
#include <string_view>
#include <variant>

#include "fuzz_input.h"
#include "image/manifest.h"
#include "image/reference.h"

namespace {

using namespace hutch::image;

constexpr std::string_view kHints[] = {
    "",
    media::kOciIndex,
    media::kOciManifest,
    media::kDockerList,
    media::kDockerManifest,
    "application/vnd.docker.distribution.manifest.v1+prettyjws",
    "text/plain",
};

void check(bool ok) {
  if (!ok) std::abort();
}

void checkDescriptor(const Descriptor& d) {
  check(isValidDigest(d.digest));
  check(d.size >= 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hutch::fuzz::FuzzInput input(data, size);
  std::string_view hint = kHints[input.byte() % std::size(kHints)];
  std::string_view text = input.rest();
  Limits limits;
  limits.max_layers = 64;
  limits.max_total_layer_bytes = uint64_t{1} << 40;

  if (auto doc = parseDocument(text, hint, limits)) {
    if (auto* index = std::get_if<Index>(&*doc)) {
      check(index->manifests.size() <= limits.max_index_entries);
      for (const Descriptor& d : index->manifests) checkDescriptor(d);
      for (const Platform& want :
           {Platform{"linux", "amd64", ""}, Platform{"linux", "arm64", "v8"}}) {
        if (auto chosen = selectPlatform(*index, want)) {
          checkDescriptor(*chosen);
          check(!chosen->platform || (chosen->platform->os == want.os &&
                                      chosen->platform->architecture == want.architecture));
        }
      }
    } else {
      const auto& m = std::get<Manifest>(*doc);
      checkDescriptor(m.config);
      check(m.layers.size() <= limits.max_layers);
      uint64_t total = 0;
      for (const Descriptor& d : m.layers) {
        checkDescriptor(d);
        check(layerCompression(d.media_type).has_value());
        total += static_cast<uint64_t>(d.size);
      }
      check(total <= limits.max_total_layer_bytes);
    }
  }
  if (auto config = parseConfig(text, limits)) {
    check(config->diff_ids.size() <= limits.max_layers);
    for (const std::string& id : config->diff_ids) check(isValidDigest(id));
  }
  if (auto ref = parseReference(text.substr(0, 512))) {
    check(!ref->registry.empty() && !ref->repository.empty());
    check(!ref->tag.empty() || !ref->digest.empty());
    auto again = parseReference(ref->str());
    check(again && *again == *ref);
    (void)isLoopbackRegistry(*ref);
  }
  return 0;
}
