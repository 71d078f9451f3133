// The Hugging Face hub cache: HUB/models--ORG--NAME/{refs/main, snapshots/REV/}
// (snapshot files are symlinks into blobs/; they are used as they are, so a
// split model's other parts are found beside its first). See locate.h.
#include <algorithm>

#include "io/whole_file.h"
#include "store/model_files.h"
#include "store/stores.h"
#include "util/error.h"

namespace sluice::store::detail {
namespace {

constexpr const char* kPrefix = "models--";

// The snapshot refs/main names when it exists, else the most recently
// modified one; nullopt when there is none.
std::optional<fs::path> pick_snapshot(const fs::path& repo) {
  const fs::path snapshots = repo / "snapshots";
  if (is_file(repo / "refs" / "main")) {
    try {
      std::string rev = io::read_whole_file((repo / "refs" / "main").string(), 4096);
      rev.erase(std::remove_if(rev.begin(), rev.end(),
                               [](char c) { return c == '\n' || c == '\r' || c == ' '; }),
                rev.end());
      if (plain_name(rev) && is_dir(snapshots / rev)) return snapshots / rev;
    } catch (const Error&) {
      // An unreadable ref falls back to the newest snapshot, like a missing one.
    }
  }
  std::optional<fs::path> newest;
  fs::file_time_type newest_time{};
  for (const std::string& rev : subfolders(snapshots)) {
    std::error_code ec;
    const fs::file_time_type t = fs::last_write_time(snapshots / rev, ec);
    if (!ec && (!newest || t > newest_time)) {
      newest = snapshots / rev;
      newest_time = t;
    }
  }
  return newest;
}

}  // namespace

Lookup find_in_hf_cache(const std::string& ref, const std::string& hub) {
  if (hub.empty())
    return {"",
            "Hugging Face cache: no cache folder ($HF_HUB_CACHE, $HF_HOME and $HOME are unset)"};
  std::string org, name, selector;
  if (!split_repo_ref(ref, org, name, selector))
    return {"",
            "Hugging Face cache (" + hub + "): '" + ref + "' is not ORG/NAME[:FILE.gguf|:QUANT]"};
  const std::string folder = std::string(kPrefix) + org + "--" + name;
  const std::optional<fs::path> repo = find_child(hub, folder);
  if (!repo || !is_dir(*repo))
    return {"", "Hugging Face cache: " + (fs::path(hub) / folder).string() + ": no such folder"};
  const std::optional<fs::path> snap = pick_snapshot(*repo);
  if (!snap) return {"", "Hugging Face cache: " + (*repo / "snapshots").string() + ": no snapshot"};
  const std::vector<std::string> files = model_files(*snap);
  const std::optional<std::string> pick =
      pick_model(files, selector, "Hugging Face cache " + snap->string());
  if (!pick)
    return {"", "Hugging Face cache: " + snap->string() + ": no model file" +
                    (selector.empty() ? "" : " matching '" + selector + "'") +
                    " (has: " + join_names(files) + ")"};
  return {(*snap / *pick).string(), ""};
}

void list_hf_cache(const std::string& hub, std::vector<StoredModel>& out) {
  if (hub.empty()) return;
  for (const std::string& folder : subfolders(hub)) {
    if (folder.rfind(kPrefix, 0) != 0) continue;  // datasets--, spaces--, .locks
    const std::string repo = folder.substr(std::string(kPrefix).size());
    const size_t sep = repo.find("--");
    if (sep == std::string::npos) continue;
    const std::string ref = repo.substr(0, sep) + "/" + repo.substr(sep + 2);
    const std::optional<fs::path> snap = pick_snapshot(fs::path(hub) / folder);
    if (!snap) continue;
    const std::vector<std::string> files = model_files(*snap);
    for (const std::string& f : files)
      out.push_back(
          {"huggingface", files.size() == 1 ? ref : ref + ":" + f, (*snap / f).string(), ""});
  }
}

}  // namespace sluice::store::detail
