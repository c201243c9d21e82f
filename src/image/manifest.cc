#include "image/manifest.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

namespace hutch::image {

namespace {

using json = nlohmann::json;

Error invalid(std::string_view what, std::string_view detail) {
  return Error(Errc::kInvalidArgument,
               fmt::format("The image's {} is malformed: {}; the registry sent a broken image "
                           "(pull again or fix the image)",
                           what, detail));
}

constexpr std::string_view kSchema1Message =
    "Docker schema 1 images are not supported; push the image again with a current Docker or "
    "skopeo";

bool isSchema1(std::string_view media_type) {
  return media_type == "application/vnd.docker.distribution.manifest.v1+json" ||
         media_type == "application/vnd.docker.distribution.manifest.v1+prettyjws";
}
bool isIndexType(std::string_view t) {
  return t == media::kOciIndex || t == media::kDockerList;
}
bool isManifestType(std::string_view t) {
  return t == media::kOciManifest || t == media::kDockerManifest;
}

Result<json> parseObject(std::string_view text, std::string_view what, const Limits& limits) {
  if (text.size() > limits.max_document_bytes) {
    return fail(Errc::kResourceExhausted,
                fmt::format("The image's {} is {} bytes, more than the limit of {}", what,
                            text.size(), limits.max_document_bytes));
  }
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail(invalid(what, "it is not a JSON object"));
  return j;
}

// An optional string field ("" when absent or null).
Result<std::string> optString(const json& obj, const char* key, std::string_view what) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::string();
  if (!it->is_string()) return fail(invalid(what, fmt::format("\"{}\" is not a string", key)));
  return it->get<std::string>();
}

Result<std::string> reqString(const json& obj, const char* key, std::string_view what) {
  HUTCH_TRY(std::string s, optString(obj, key, what));
  if (s.empty()) return fail(invalid(what, fmt::format("\"{}\" is missing or empty", key)));
  return s;
}

// An optional array of strings (empty when absent or null).
Result<std::vector<std::string>> optStrings(const json& obj, const char* key,
                                            std::string_view what) {
  std::vector<std::string> out;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return out;
  if (!it->is_array()) return fail(invalid(what, fmt::format("\"{}\" is not an array", key)));
  for (const json& v : *it) {
    if (!v.is_string()) {
      return fail(invalid(what, fmt::format("\"{}\" holds a non-string", key)));
    }
    out.push_back(v.get<std::string>());
  }
  return out;
}

Result<std::map<std::string, std::string>> optStringMap(const json& obj, const char* key,
                                                        std::string_view what) {
  std::map<std::string, std::string> out;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return out;
  if (!it->is_object()) return fail(invalid(what, fmt::format("\"{}\" is not an object", key)));
  for (const auto& [k, v] : it->items()) {
    if (!v.is_string()) {
      return fail(invalid(what, fmt::format("\"{}\" has a non-string value", key)));
    }
    out[k] = v.get<std::string>();
  }
  return out;
}

Result<Platform> parsePlatform(const json& p, std::string_view what) {
  if (!p.is_object()) return fail(invalid(what, "\"platform\" is not an object"));
  Platform out;
  HUTCH_TRY(out.os, optString(p, "os", what));
  HUTCH_TRY(out.architecture, optString(p, "architecture", what));
  HUTCH_TRY(out.variant, optString(p, "variant", what));
  return out;
}

Result<Descriptor> parseDescriptor(const json& d, std::string_view what) {
  if (!d.is_object()) return fail(invalid(what, "a descriptor is not an object"));
  Descriptor out;
  HUTCH_TRY(out.media_type, reqString(d, "mediaType", what));
  HUTCH_TRY(out.digest, reqString(d, "digest", what));
  if (!isValidDigest(out.digest)) {
    return fail(invalid(what, fmt::format("'{}' is not a sha256 digest (only sha256 is supported)",
                                          out.digest.substr(0, 100))));
  }
  auto size = d.find("size");
  if (size == d.end() || !size->is_number_integer() ||
      (size->is_number_unsigned() &&
       size->get<uint64_t>() > uint64_t{std::numeric_limits<int64_t>::max()}) ||
      size->get<int64_t>() < 0) {
    return fail(invalid(what, fmt::format("the size of {} is missing or not a non-negative "
                                          "integer",
                                          out.digest)));
  }
  out.size = size->get<int64_t>();
  if (auto p = d.find("platform"); p != d.end() && !p->is_null()) {
    HUTCH_TRY(out.platform, parsePlatform(*p, what));
  }
  HUTCH_TRY(out.annotations, optStringMap(d, "annotations", what));
  return out;
}

Result<Index> parseIndex(const json& j, std::string media_type, const Limits& limits) {
  constexpr std::string_view kWhat = "index";
  auto list = j.find("manifests");
  if (list == j.end() || !list->is_array()) {
    return fail(invalid(kWhat, "\"manifests\" is missing or not an array"));
  }
  if (list->size() > limits.max_index_entries) {
    return fail(Errc::kResourceExhausted,
                fmt::format("The image index lists {} manifests, more than the limit of {}",
                            list->size(), limits.max_index_entries));
  }
  Index out;
  out.media_type = std::move(media_type);
  for (const json& d : *list) {
    HUTCH_TRY(Descriptor desc, parseDescriptor(d, kWhat));
    out.manifests.push_back(std::move(desc));
  }
  return out;
}

Result<Manifest> parseManifest(const json& j, std::string media_type, const Limits& limits) {
  constexpr std::string_view kWhat = "manifest";
  Manifest out;
  out.media_type = std::move(media_type);
  auto config = j.find("config");
  if (config == j.end()) return fail(invalid(kWhat, "\"config\" is missing"));
  HUTCH_TRY(out.config, parseDescriptor(*config, kWhat));
  if (out.config.media_type != media::kOciConfig && out.config.media_type != media::kDockerConfig) {
    return fail(Errc::kUnsupported,
                fmt::format("This is not a container image (its config is of type {}); give "
                            "an image that docker run can run",
                            out.config.media_type.substr(0, 200)));
  }
  auto layers = j.find("layers");
  if (layers == j.end() || !layers->is_array()) {
    return fail(invalid(kWhat, "\"layers\" is missing or not an array"));
  }
  if (layers->size() > limits.max_layers) {
    return fail(Errc::kResourceExhausted,
                fmt::format("The image has {} layers, more than the limit of {}", layers->size(),
                            limits.max_layers));
  }
  uint64_t total = 0;
  for (const json& l : *layers) {
    HUTCH_TRY(Descriptor layer, parseDescriptor(l, kWhat));
    HUTCH_TRY(layer.compression, layerCompression(layer.media_type));
    total += static_cast<uint64_t>(layer.size);  // each < 2^63: the sum of 256 cannot wrap
    if (total > limits.max_total_layer_bytes) {
      return fail(Errc::kResourceExhausted,
                  fmt::format("The image's layers are more than {} bytes compressed, the limit",
                              limits.max_total_layer_bytes));
    }
    out.layers.push_back(std::move(layer));
  }
  return out;
}

}  // namespace

std::string Platform::str() const {
  std::string out = (os.empty() ? "?" : os) + "/" + (architecture.empty() ? "?" : architecture);
  if (!variant.empty()) out += "/" + variant;
  return out;
}

Result<Compression> layerCompression(std::string_view t) {
  if (t == media::kOciLayer || t == "application/vnd.docker.image.rootfs.diff.tar") {
    return Compression::kNone;
  }
  if (t == media::kOciLayerGzip || t == media::kDockerLayerGzip) return Compression::kGzip;
  if (t == media::kOciLayerZstd) return Compression::kZstd;
  std::string shown(t.substr(0, 200));
  if (t.find("nondistributable") != std::string_view::npos ||
      t.find("foreign") != std::string_view::npos) {
    return fail(Errc::kUnsupported,
                fmt::format("The image has a foreign (non-distributable) layer ({}) that "
                            "registries do not serve; use an image without one",
                            shown));
  }
  return fail(Errc::kUnsupported,
              fmt::format("The image has a layer of unknown type {}; only tar layers (plain, "
                          "gzip or zstd) are supported",
                          shown));
}

Result<MediaDocument> parseDocument(std::string_view text, std::string_view media_type_hint,
                                    const Limits& limits) {
  if (isSchema1(media_type_hint)) return fail(Errc::kUnsupported, std::string(kSchema1Message));
  HUTCH_TRY(json j, parseObject(text, "manifest", limits));
  try {
    if (auto v = j.find("schemaVersion"); v != j.end()) {
      if (v->is_number_integer() && v->get<int64_t>() == 1) {
        return fail(Errc::kUnsupported, std::string(kSchema1Message));
      }
      if (!v->is_number_integer() || v->get<int64_t>() != 2) {
        return fail(invalid("manifest", "\"schemaVersion\" is not 2"));
      }
    }
    HUTCH_TRY(std::string own, optString(j, "mediaType", "manifest"));
    if (isSchema1(own)) return fail(Errc::kUnsupported, std::string(kSchema1Message));
    if (!own.empty() && !media_type_hint.empty() && own != media_type_hint) {
      return fail(
          invalid("manifest", fmt::format("it says it is {} but was given as {}",
                                          own.substr(0, 200), media_type_hint.substr(0, 200))));
    }
    std::string type = own.empty() ? std::string(media_type_hint) : own;
    if (type.empty()) {
      if (j.contains("manifests")) {
        type = media::kOciIndex;
      } else if (j.contains("config") && j.contains("layers")) {
        type = media::kOciManifest;
      } else {
        return fail(invalid("manifest",
                            "it has no mediaType and is neither an index nor a "
                            "manifest"));
      }
    }
    if (isIndexType(type)) {
      HUTCH_TRY(Index index, parseIndex(j, type, limits));
      return MediaDocument(std::move(index));
    }
    if (isManifestType(type)) {
      HUTCH_TRY(Manifest manifest, parseManifest(j, type, limits));
      return MediaDocument(std::move(manifest));
    }
    return fail(Errc::kUnsupported,
                fmt::format("The image's manifest is of unknown type {}; give an OCI or Docker "
                            "schema 2 image",
                            type.substr(0, 200)));
  } catch (const json::exception& e) {
    return fail(invalid("manifest", e.what()));
  }
}

Result<Descriptor> selectPlatform(const Index& index, const Platform& want) {
  const Descriptor* chosen = nullptr;
  std::vector<std::string> offered;
  std::vector<const Descriptor*> unplatformed;
  for (const Descriptor& d : index.manifests) {
    if (!isManifestType(d.media_type)) continue;
    if (!d.platform) {
      unplatformed.push_back(&d);
      continue;
    }
    const Platform& p = *d.platform;
    if (p.os == "unknown" && p.architecture == "unknown") continue;  // attestations
    offered.push_back(p.str());
    if (p.os != want.os || p.architecture != want.architecture) continue;
    if (p.variant == want.variant) return d;
    if (want.variant.empty() && chosen == nullptr) chosen = &d;
  }
  if (chosen != nullptr) return *chosen;
  if (offered.empty() && unplatformed.size() == 1) return *unplatformed.front();
  if (offered.empty()) offered.push_back("no platform-specific images");
  return fail(Errc::kNotFound, fmt::format("The image has no {} variant; it offers {}", want.str(),
                                           fmt::join(offered, ", ")));
}

Result<ImageConfig> parseConfig(std::string_view text, const Limits& limits) {
  constexpr std::string_view kWhat = "config";
  HUTCH_TRY(json j, parseObject(text, kWhat, limits));
  try {
    ImageConfig out;
    HUTCH_TRY(out.os, reqString(j, "os", kWhat));
    HUTCH_TRY(out.architecture, reqString(j, "architecture", kWhat));
    HUTCH_TRY(out.variant, optString(j, "variant", kWhat));
    if (auto c = j.find("config"); c != j.end() && !c->is_null()) {
      if (!c->is_object()) return fail(invalid(kWhat, "\"config\" is not an object"));
      HUTCH_TRY(out.env, optStrings(*c, "Env", kWhat));
      HUTCH_TRY(out.working_dir, optString(*c, "WorkingDir", kWhat));
      HUTCH_TRY(out.user, optString(*c, "User", kWhat));
      HUTCH_TRY(out.entrypoint, optStrings(*c, "Entrypoint", kWhat));
      HUTCH_TRY(out.cmd, optStrings(*c, "Cmd", kWhat));
      HUTCH_TRY(out.labels, optStringMap(*c, "Labels", kWhat));
      HUTCH_TRY(out.stop_signal, optString(*c, "StopSignal", kWhat));
      if (auto p = c->find("ExposedPorts"); p != c->end() && !p->is_null()) {
        if (!p->is_object()) return fail(invalid(kWhat, "\"ExposedPorts\" is not an object"));
        for (const auto& item : p->items()) out.exposed_ports.push_back(item.key());
      }
    }
    auto rootfs = j.find("rootfs");
    if (rootfs == j.end() || !rootfs->is_object()) {
      return fail(invalid(kWhat, "\"rootfs\" is missing or not an object"));
    }
    HUTCH_TRY(std::string type, optString(*rootfs, "type", kWhat));
    if (type != "layers") return fail(invalid(kWhat, "rootfs.type is not \"layers\""));
    HUTCH_TRY(out.diff_ids, optStrings(*rootfs, "diff_ids", kWhat));
    if (out.diff_ids.size() > limits.max_layers) {
      return fail(Errc::kResourceExhausted,
                  fmt::format("The image has {} layers, more than the limit of {}",
                              out.diff_ids.size(), limits.max_layers));
    }
    for (const std::string& id : out.diff_ids) {
      if (!isValidDigest(id)) {
        return fail(invalid(
            kWhat, fmt::format("the diff_id '{}' is not a sha256 digest", id.substr(0, 100))));
      }
    }
    return out;
  } catch (const json::exception& e) {
    return fail(invalid(kWhat, e.what()));
  }
}

Result<> checkConfig(const Manifest& manifest, const ImageConfig& config, const Platform& want) {
  if (manifest.layers.size() != config.diff_ids.size()) {
    return fail(invalid("config", fmt::format("it lists {} layer diff_ids but the manifest has {} "
                                              "layers",
                                              config.diff_ids.size(), manifest.layers.size())));
  }
  if (config.os != want.os || config.architecture != want.architecture ||
      (!want.variant.empty() && config.variant != want.variant)) {
    Platform got{config.os, config.architecture, config.variant};
    return fail(Errc::kUnsupported,
                fmt::format("The image is built for {}, not {}; use an image for {}", got.str(),
                            want.str(), want.str()));
  }
  return ok();
}

}  // namespace hutch::image
