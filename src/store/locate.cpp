// resolve_model and list_models: the stores asked in order (locate.h).
#include "store/locate.h"

#include "store/model_files.h"
#include "store/stores.h"
#include "util/error.h"

namespace sluice::store {

bool looks_like_path(const std::string& arg) {
  if (arg.empty() || arg[0] == '/' || arg[0] == '~' || arg.rfind("./", 0) == 0 ||
      arg.rfind("../", 0) == 0 || arg == "." || arg == "..")
    return true;
  return arg.find(':') == std::string::npos && arg.size() > 5 &&
         detail::lower(arg.substr(arg.size() - 5)) == ".gguf";
}

std::string resolve_model(const std::string& arg, const StoreRoots& roots) {
  std::error_code ec;
  if ((std::filesystem::exists(arg, ec) && !detail::is_dir(arg)) || looks_like_path(arg))
    return arg;
  std::vector<std::string> looked;
  const auto ask = [&looked](const detail::Lookup& l) {
    if (l.path.empty()) looked.push_back(l.looked);
    return l.path;
  };
  if (std::string p = ask(detail::find_in_ollama(arg, roots.ollama)); !p.empty()) return p;
  if (std::string p = ask(detail::find_in_hf_cache(arg, roots.hf_hub)); !p.empty()) return p;
  for (const std::string& root : roots.lmstudio)
    if (std::string p = ask(detail::find_in_lmstudio(arg, root)); !p.empty()) return p;
  if (roots.lmstudio.empty()) looked.push_back("LM Studio: no models folder ($HOME is unset)");
  std::string msg =
      "'" + arg +
      "' is not a file, and no local model store has it (nothing is downloaded); looked in:";
  for (const std::string& l : looked) msg += "\n  " + l;
  throw Error(msg);
}

std::vector<StoredModel> list_models(const StoreRoots& roots) {
  std::vector<StoredModel> out;
  detail::list_ollama(roots.ollama, out);
  detail::list_hf_cache(roots.hf_hub, out);
  for (const std::string& root : roots.lmstudio) detail::list_lmstudio(root, out);
  return out;
}

}  // namespace sluice::store
