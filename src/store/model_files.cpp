#include "store/model_files.h"

#include <algorithm>
#include <cctype>

#include "util/error.h"

namespace sluice::store::detail {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

namespace {

bool ends_with_ci(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && lower(s.substr(s.size() - suffix.size())) == suffix;
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::optional<fs::path> find_child(const fs::path& dir, const std::string& name) {
  std::error_code ec;
  if (fs::exists(dir / name, ec)) return dir / name;
  std::optional<fs::path> found;
  const std::string want = lower(name);
  for (fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    if (lower(it->path().filename().string()) != want) continue;
    if (found) return std::nullopt;  // two spellings: neither is "the" one
    found = it->path();
  }
  return found;
}

std::vector<std::string> subfolders(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (!n.empty() && n[0] != '.' && is_dir(it->path())) out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

int split_part(const std::string& file_name) {
  // NAME-00001-of-00003.gguf: the last 20 characters are "-KKKKK-of-NNNNN.gguf".
  constexpr size_t kTail = 20;
  if (file_name.size() <= kTail || !ends_with_ci(file_name, ".gguf")) return 0;
  const std::string t = lower(file_name.substr(file_name.size() - kTail));
  if (t[0] != '-' || t.substr(6, 4) != "-of-" || !all_digits(t.substr(1, 5)) ||
      !all_digits(t.substr(10, 5)))
    return 0;
  return std::stoi(t.substr(1, 5));
}

std::vector<std::string> model_files(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.') {
      if (is_dir(it->path())) it.disable_recursion_pending();
      continue;
    }
    if (it.depth() >= 2 && is_dir(it->path()))
      it.disable_recursion_pending();  // three levels are plenty
    if (!ends_with_ci(name, ".gguf") || !is_file(it->path())) continue;
    if (split_part(name) > 1 || lower(name).rfind("mmproj", 0) == 0) continue;
    out.push_back(it->path().lexically_relative(dir).generic_string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string join_names(const std::vector<std::string>& names, size_t max) {
  if (names.empty()) return "none";
  std::string s;
  for (size_t i = 0; i < names.size() && i < max; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > max) s += ", and " + std::to_string(names.size() - max) + " more";
  return s;
}

std::optional<std::string> pick_model(const std::vector<std::string>& files,
                                      const std::string& selector, const std::string& where) {
  std::vector<std::string> hits;
  const std::string want = lower(selector);
  for (const std::string& f : files) {
    const std::string rel = lower(f);
    const std::string base = rel.substr(rel.rfind('/') + 1);  // npos + 1 == 0: the whole path
    if (selector.empty() || (ends_with_ci(selector, ".gguf") ? (rel == want || base == want)
                                                             : rel.find(want) != std::string::npos))
      hits.push_back(f);
  }
  if (hits.size() > 1) {
    if (selector.empty())
      fail(where, "holds " + std::to_string(hits.size()) +
                      " models; add :FILE.gguf or :QUANT to pick one of " + join_names(hits));
    fail(where, "'" + selector + "' matches " + std::to_string(hits.size()) +
                    " models; name one of " + join_names(hits));
  }
  if (hits.empty()) return std::nullopt;
  return hits.front();
}

bool plain_name(const std::string& s) {
  if (s.empty() || s == "." || s == "..") return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

bool split_repo_ref(const std::string& ref, std::string& org, std::string& name,
                    std::string& selector) {
  const size_t colon = ref.find(':');
  const std::string repo = ref.substr(0, colon);
  selector = colon == std::string::npos ? "" : ref.substr(colon + 1);
  const size_t slash = repo.find('/');
  if (slash == std::string::npos) return false;
  org = repo.substr(0, slash);
  name = repo.substr(slash + 1);
  if (!plain_name(org) || !plain_name(name)) return false;
  if (colon != std::string::npos && selector.empty()) return false;
  // The selector may name a file in a subfolder, never one outside the model's folder.
  if (!selector.empty()) {
    if (selector[0] == '/') return false;
    size_t start = 0;
    while (start <= selector.size()) {
      const size_t end = std::min(selector.find('/', start), selector.size());
      if (!plain_name(selector.substr(start, end - start))) return false;
      start = end + 1;
    }
  }
  return true;
}

}  // namespace sluice::store::detail
