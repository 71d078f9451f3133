// The ollama store: ROOT/manifests/HOST/NAMESPACE/MODEL/TAG (JSON manifests)
// and ROOT/blobs/sha256-HEX (content-addressed layers; the model layer is the
// GGUF). See locate.h for the reference syntax.
#include <nlohmann/json.hpp>

#include "io/whole_file.h"
#include "store/model_files.h"
#include "store/stores.h"
#include "util/error.h"

namespace sluice::store::detail {
namespace {

constexpr const char* kDefaultHost = "registry.ollama.ai";
constexpr const char* kDefaultNamespace = "library";
constexpr const char* kModelMediaType = "application/vnd.ollama.image.model";
constexpr uint64_t kMaxManifestBytes = 1 << 20;  // real ones are about 1 KiB

struct OllamaName {
  std::string host = kDefaultHost, ns = kDefaultNamespace, model, tag = "latest";
};

// A host may carry a port (localhost:5000).
bool host_name(const std::string& s) {
  const size_t colon = s.find(':');
  return plain_name(s.substr(0, colon)) &&
         (colon == std::string::npos || plain_name(s.substr(colon + 1)));
}

// [HOST/][NAMESPACE/]MODEL[:TAG]; false when `ref` is not of that shape.
bool parse_name(const std::string& ref, OllamaName& n) {
  const size_t slash = ref.rfind('/');
  const size_t colon = ref.rfind(':');
  std::string path = ref;
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    n.tag = ref.substr(colon + 1);
    path = ref.substr(0, colon);
  }
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t end = path.find('/', start);
    parts.push_back(path.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (parts.size() > 3) return false;
  if (parts.size() == 3) n.host = parts[0];
  if (parts.size() >= 2) n.ns = parts[parts.size() - 2];
  n.model = parts.back();
  return host_name(n.host) && plain_name(n.ns) && plain_name(n.model) && plain_name(n.tag);
}

// The shortest name that means `n` (what `ollama list` shows).
std::string short_name(const OllamaName& n) {
  std::string s = n.model + ":" + n.tag;
  if (n.host != kDefaultHost) return n.host + "/" + n.ns + "/" + s;
  if (n.ns != kDefaultNamespace) return n.ns + "/" + s;
  return s;
}

// The GGUF blob a manifest names; sluice::Error naming the manifest otherwise.
std::string blob_of(const fs::path& manifest, const fs::path& root) {
  const std::string where = "ollama manifest " + manifest.string();
  const std::string text = io::read_whole_file(manifest.string(), kMaxManifestBytes);
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) fail(where, "not valid JSON");
  const auto layers = j.find("layers");
  if (layers == j.end() || !layers->is_array()) fail(where, "has no \"layers\" array");
  for (const nlohmann::json& layer : *layers) {
    if (!layer.is_object() || layer.value("mediaType", nlohmann::json()) != kModelMediaType)
      continue;
    const nlohmann::json digest = layer.value("digest", nlohmann::json());
    const std::string d = digest.is_string() ? digest.get<std::string>() : "";
    const bool hex = d.size() == 7 + 64 && d.rfind("sha256:", 0) == 0 &&
                     d.find_first_not_of("0123456789abcdef", 7) == std::string::npos;
    if (!hex)
      fail(where, "the model layer's digest is not sha256:<64 hex digits> (got '" + d + "')");
    const fs::path blob = root / "blobs" / ("sha256-" + d.substr(7));
    if (!is_file(blob)) fail(where, "its model blob " + blob.string() + " is missing");
    return blob.string();
  }
  fail(where, std::string("has no GGUF model layer (mediaType ") + kModelMediaType + ")");
}

}  // namespace

Lookup find_in_ollama(const std::string& ref, const std::string& root) {
  if (root.empty()) return {"", "ollama: no store folder ($OLLAMA_MODELS and $HOME are unset)"};
  OllamaName n;
  if (!parse_name(ref, n))
    return {"", "ollama (" + root + "): '" + ref +
                    "' is not an ollama name [HOST/][NAMESPACE/]MODEL[:TAG]"};
  fs::path at = fs::path(root) / "manifests";
  for (const std::string& part : {n.host, n.ns, n.model, n.tag}) {
    const std::optional<fs::path> next = find_child(at, part);
    if (!next) {
      const fs::path want = fs::path(root) / "manifests" / n.host / n.ns / n.model / n.tag;
      return {"", "ollama: " + want.string() + ": no such manifest"};
    }
    at = *next;
  }
  if (!is_file(at)) return {"", "ollama: " + at.string() + ": not a manifest file"};
  return {blob_of(at, root), ""};
}

void list_ollama(const std::string& root, std::vector<StoredModel>& out) {
  if (root.empty()) return;
  const fs::path manifests = fs::path(root) / "manifests";
  std::vector<StoredModel> found;
  for (const std::string& host : subfolders(manifests))
    for (const std::string& ns : subfolders(manifests / host))
      for (const std::string& model : subfolders(manifests / host / ns)) {
        std::error_code ec;
        for (fs::directory_iterator it(manifests / host / ns / model, ec), end; !ec && it != end;
             it.increment(ec)) {
          const std::string tag = it->path().filename().string();
          if (tag.empty() || tag[0] == '.' || !is_file(it->path())) continue;
          StoredModel m{"ollama", short_name({host, ns, model, tag}), "", ""};
          try {
            m.path = blob_of(it->path(), root);
          } catch (const Error& e) {
            m.error = e.what();
          }
          found.push_back(std::move(m));
        }
      }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.reference < b.reference; });
  out.insert(out.end(), found.begin(), found.end());
}

}  // namespace sluice::store::detail
