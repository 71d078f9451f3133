// `sluice models [--json]`: the GGUF models already on this machine in the
// ollama store, the Hugging Face cache and LM Studio's folder (store/locate.h),
// each with the reference -m takes, its size, architecture and quant, and
// whether sluice runs it. Only GGUF headers are read, never weights; a file
// that does not parse is listed with its error.
#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/model_ref.h"
#include "cli/stdout_output.h"
#include "gguf/gguf.h"
#include "model/arch.h"
#include "tools/model_info.h"
#include "util/error.h"

namespace sluice::cli {
namespace {

struct Row {
  store::StoredModel entry;
  std::optional<uint64_t> bytes;      // all splits; the one file when the header did not parse
  std::string architecture;           // "" when unknown
  std::optional<uint64_t> file_type;  // general.file_type
  bool runs = false;
  std::string note;  // why it does not run: the error, or the unsupported architecture
};

bool supported(const std::string& arch) {
  const auto& all = model::architectures();
  return std::any_of(all.begin(), all.end(),
                     [&](const model::ArchEntry& e) { return arch == e.name; });
}

Row describe(const store::StoredModel& m) {
  Row r{m, std::nullopt, "", std::nullopt, false, m.error};
  if (!m.error.empty()) return r;
  try {
    const gguf::GgufModel g = gguf::GgufModel::open(m.path);  // headers only
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < g.n_splits(); ++i) bytes += g.split(i).file_size;
    r.bytes = bytes;
    r.architecture = g.architecture();
    r.file_type = g.metadata().get_uint("general.file_type");
    r.runs = supported(r.architecture);
    if (!r.runs)
      r.note = "architecture '" + r.architecture +
               "' is not supported (supported: " + model::supported_architectures() + ")";
  } catch (const Error& e) {
    std::error_code ec;
    const uintmax_t size = std::filesystem::file_size(m.path, ec);
    if (!ec) r.bytes = size;
    r.note = e.what();
  }
  return r;
}

// inspect's name for the file type ("Q4_K_M"); the number when llama.cpp names none.
std::string quant_name(const std::optional<uint64_t>& ft) {
  if (!ft) return "";
  const std::string name = tools::file_type_name(*ft);
  return name.empty() ? std::to_string(*ft) : name;
}

std::string human_size(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30))
    std::snprintf(buf, sizeof buf, "%.1f GiB", b / 1073741824.0);
  else if (b >= (1ull << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / 1048576.0);
  else if (b >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

std::string looked_in(const store::StoreRoots& roots) {
  std::string s = "ollama (" + (roots.ollama.empty() ? "unknown" : roots.ollama) +
                  "), Hugging Face cache (" + (roots.hf_hub.empty() ? "unknown" : roots.hf_hub) +
                  "), LM Studio (";
  for (size_t i = 0; i < roots.lmstudio.size(); ++i) s += (i ? ", " : "") + roots.lmstudio[i];
  return s + (roots.lmstudio.empty() ? "unknown)" : ")");
}

nlohmann::json to_json(const std::vector<Row>& rows, const store::StoreRoots& roots) {
  const auto or_null = [](const std::string& s) {
    return s.empty() ? nlohmann::json() : nlohmann::json(s);
  };
  nlohmann::json models = nlohmann::json::array();
  for (const Row& r : rows)
    models.push_back({{"store", r.entry.store},
                      {"reference", r.entry.reference},
                      {"path", or_null(r.entry.path)},
                      {"size_bytes", r.bytes ? nlohmann::json(*r.bytes) : nlohmann::json()},
                      {"architecture", or_null(r.architecture)},
                      {"quant", or_null(quant_name(r.file_type))},
                      {"file_type", r.file_type ? nlohmann::json(*r.file_type) : nlohmann::json()},
                      {"runs", r.runs},
                      {"error", r.runs ? nlohmann::json() : or_null(r.note)}});
  return {{"models", models},
          {"stores",
           {{"ollama", or_null(roots.ollama)},
            {"huggingface", or_null(roots.hf_hub)},
            {"lmstudio", roots.lmstudio}}}};
}

std::string to_text(const std::vector<Row>& rows) {
  std::vector<std::vector<std::string>> cells{
      {"REFERENCE", "STORE", "SIZE", "ARCH", "QUANT", "RUNS", "NOTE"}};
  for (const Row& r : rows) {
    const std::string q = quant_name(r.file_type);
    cells.push_back({r.entry.reference, r.entry.store, r.bytes ? human_size(*r.bytes) : "-",
                     r.architecture.empty() ? "-" : r.architecture, q.empty() ? "-" : q,
                     r.runs ? "yes" : "no", r.note});
  }
  std::vector<size_t> width(cells[0].size(), 0);
  for (const auto& row : cells)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  std::string s;
  for (const auto& row : cells) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    s += line + "\n";
  }
  return s;
}

}  // namespace

void register_models(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "models",
      "List the GGUF models in ollama, the Hugging Face cache and LM Studio (names -m takes)");
  cmd->add_flag("--json", *json, "Print one JSON object: {\"models\": [...], \"stores\": {...}}");
  cmd->footer(
      "Looks in $OLLAMA_MODELS (else ~/.ollama/models), $HF_HUB_CACHE (else $HF_HOME/hub, else\n"
      "$XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub) and ~/.lmstudio/models (and ~/.cache/lm-studio/models). Reads\n"
      "only GGUF headers; downloads nothing.\n"
      "Examples:\n  sluice models\n  sluice run -m qwen3:30b-a3b -p 'Hello'\n"
      "  sluice run -m unsloth/Qwen3-30B-A3B-GGUF:Q4_K_M -p 'Hello'");
  cmd->callback([json] {
    const store::StoreRoots roots = store_roots_from_env();
    std::vector<Row> rows;
    for (const store::StoredModel& m : store::list_models(roots)) rows.push_back(describe(m));
    if (*json) {
      outf("%s\n", to_json(rows, roots).dump(2).c_str());
    } else if (rows.empty()) {
      out("no models found in " + looked_in(roots) + "\n");
    } else {
      out(to_text(rows));
    }
  });
}

}  // namespace sluice::cli
