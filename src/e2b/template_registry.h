// The templates E2B's builder made (docs/e2b.md "Templates"): E2B's template id and name, the
// key that owns it, and its tags, each naming a build and the hutch template that build made.
// Kept in one JSON file (<state>/e2b/templates.json, replaced whole on every change) so that
// Sandbox.create("name:tag") finds them after a hutchd restart; builds in flight are not here
// (template_build.h keeps them in memory).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace hutch::e2b {

struct E2bTemplate {
  struct Tag {
    std::string build_id;
    std::string hutch_template;  // what boxes of this tag are made from
    int64_t created_at = 0;      // unix seconds
    // Its sandboxes' defaults (E2B's envd defaultUser and defaultWorkdir): the build's last USER
    // ("": E2B's "user") and last WORKDIR ("": the user's home), each inherited through
    // fromTemplate.
    std::string user;
    std::string workdir;
    bool operator==(const Tag&) const = default;
  };
  std::string id;        // E2B's templateID
  std::string name;      // its alias
  std::string owner_id;  // the key that built it ("" for the host)
  std::string owner_name;
  int64_t created_at = 0;
  int64_t updated_at = 0;
  unsigned cpus = 2;
  uint64_t memory_mib = 1024;
  uint64_t build_count = 0;
  bool is_public = false;  // every key may start sandboxes of it (`e2b template publish`)
  std::map<std::string, Tag> tags;
  bool operator==(const E2bTemplate&) const = default;

  // The hutch templates its tags name, each once.
  std::vector<std::string> hutchTemplates() const;
};

class TemplateRegistry {
 public:
  // Reads `file` when it is there; kInternal when it is there but unreadable.
  static Result<TemplateRegistry> open(std::filesystem::path file);

  std::optional<E2bTemplate> byId(const std::string& id) const;
  std::optional<E2bTemplate> byName(const std::string& name) const;
  // By id, else by name.
  std::optional<E2bTemplate> find(const std::string& id_or_name) const;
  std::vector<E2bTemplate> all() const;
  // Adds or replaces (by id), and writes the file.
  Result<> put(const E2bTemplate& t);
  Result<> remove(const std::string& id);

 private:
  explicit TemplateRegistry(std::filesystem::path file) : file_(std::move(file)) {}
  Result<> save() const;
  std::filesystem::path file_;
  std::map<std::string, E2bTemplate> templates_;  // by id
};

}  // namespace hutch::e2b
