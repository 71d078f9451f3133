// LM Studio's models folder: ROOT/PUBLISHER/MODEL/FILE.gguf. See locate.h.
#include "store/model_files.h"
#include "store/stores.h"

namespace sluice::store::detail {

Lookup find_in_lmstudio(const std::string& ref, const std::string& root) {
  std::string publisher, model, selector;
  if (!split_repo_ref(ref, publisher, model, selector))
    return {"",
            "LM Studio (" + root + "): '" + ref + "' is not PUBLISHER/MODEL[:FILE.gguf|:QUANT]"};
  std::optional<fs::path> dir = find_child(root, publisher);
  if (dir) dir = find_child(*dir, model);
  if (!dir || !is_dir(*dir))
    return {"", "LM Studio: " + (fs::path(root) / publisher / model).string() + ": no such folder"};
  const std::vector<std::string> files = model_files(*dir);
  const std::optional<std::string> pick = pick_model(files, selector, "LM Studio " + dir->string());
  if (!pick)
    return {"", "LM Studio: " + dir->string() + ": no model file" +
                    (selector.empty() ? "" : " matching '" + selector + "'") +
                    " (has: " + join_names(files) + ")"};
  return {(*dir / *pick).string(), ""};
}

void list_lmstudio(const std::string& root, std::vector<StoredModel>& out) {
  for (const std::string& publisher : subfolders(root))
    for (const std::string& model : subfolders(fs::path(root) / publisher)) {
      const fs::path dir = fs::path(root) / publisher / model;
      const std::vector<std::string> files = model_files(dir);
      const std::string ref = publisher + "/" + model;
      for (const std::string& f : files)
        out.push_back(
            {"lmstudio", files.size() == 1 ? ref : ref + ":" + f, (dir / f).string(), ""});
    }
}

}  // namespace sluice::store::detail
