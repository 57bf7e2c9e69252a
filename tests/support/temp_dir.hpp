// A fresh directory under /tmp for a test, removed with everything in it when the
// test's object goes away (e.g. a file storage backend's directory).
#pragma once

#include <ftw.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstdio>
#include <string>

namespace kvtest {

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

 private:
  std::string path_;
};

}  // namespace kvtest
