// Filesystem pieces the three stores share: folder lookup that forgives case,
// the model files of a folder, and picking one of them by file name or quant.
// Internal to src/store (locate.h is the interface).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace sluice::store::detail {

namespace fs = std::filesystem;

std::string lower(std::string s);
bool is_dir(const fs::path& p);   // a folder (symlinks followed); false on any error
bool is_file(const fs::path& p);  // a regular file (symlinks followed); false on any error

// dir/name when it exists; else the one entry of dir whose name equals `name`
// ignoring case; nullopt when there is none or more than one.
std::optional<fs::path> find_child(const fs::path& dir, const std::string& name);

// The names of dir's entries that are folders (not hidden), sorted.
std::vector<std::string> subfolders(const fs::path& dir);

// The part number of a split file name NAME-0000K-of-0000N.gguf (K), 0 when
// the name is not one.
int split_part(const std::string& file_name);

// The model files under dir (in it or up to two folders below, hidden entries
// skipped): paths relative to dir with '/' separators, sorted. A .gguf file
// counts unless it is a later part of a split model or an mmproj* projector.
std::vector<std::string> model_files(const fs::path& dir);

// One of `files` by `selector`: "" the only file; a name ending in .gguf the
// file with that relative path or file name; anything else the file whose
// relative path contains it (ignoring case). nullopt when nothing matches;
// sluice::Error naming `where` and listing the candidates when several do.
std::optional<std::string> pick_model(const std::vector<std::string>& files,
                                      const std::string& selector, const std::string& where);

// "a, b, c" (the first `max` and a count of the rest), or "none" when empty.
std::string join_names(const std::vector<std::string>& names, size_t max = 12);

// ORG/NAME[:SELECTOR] split into its parts; false when `ref` is not of that
// shape (two plain names, no '..', a selector that is a relative path).
bool split_repo_ref(const std::string& ref, std::string& org, std::string& name,
                    std::string& selector);

// A name component: non-empty, not '.' or '..', only letters, digits and ._-
bool plain_name(const std::string& s);

}  // namespace sluice::store::detail
