// A fresh directory under /tmp for a test, removed with everything in it when the
// test's object goes away (e.g. a file storage backend's directory), and the listing of
// a directory's entries.
#pragma once

#include <dirent.h>
#include <ftw.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace kvtest {

// Every name in the directory but "." and "..", sorted (none when it cannot be read).
inline std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/kvpool-test-XXXXXX";
    if (const char* made = mkdtemp(tmpl)) path_ = made;
  }
  ~TempDir() {
    if (path_.empty()) return;
    chmod(path_.c_str(), 0755);  // a test may have made it read-only
    nftw(
        path_.c_str(), [](const char* p, const struct stat*, int, FTW*) { return std::remove(p); }, 16,
        FTW_DEPTH | FTW_PHYS);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Empty when the directory could not be made.
  const std::string& path() const { return path_; }
  // The entries of the directory (names_in).
  std::vector<std::string> files() const { return names_in(path_); }

 private:
  std::string path_;
};

}  // namespace kvtest
