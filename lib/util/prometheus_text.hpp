// Writes the Prometheus text exposition format (version 0.0.4) family by family:
// `# HELP` and `# TYPE` once per family, then its samples, one per line.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

namespace kvp::metrics {

enum class Type { kCounter, kGauge };

// A label pair of one sample; values are escaped on output.
using Label = std::pair<const char*, const char*>;

class TextWriter {
 public:
  TextWriter() { text_.reserve(16384); }  // a pool with every tier writes about 8 KiB
  // Starts a family: `name` follows the naming rules ([a-zA-Z_:][a-zA-Z0-9_:]*; counters end in
  // _total), `help` is one line of text. Every sample up to the next family() belongs to it.
  void family(const char* name, Type type, const char* help);
  // One sample of the current family.
  void sample(uint64_t value, std::initializer_list<Label> labels = {});
  const std::string& text() const { return text_; }

 private:
  void escaped(const char* value, bool help);
  std::string text_;
  std::string name_;  // the current family's
};

}  // namespace kvp::metrics
