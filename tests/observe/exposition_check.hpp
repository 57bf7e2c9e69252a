// A small checker of the Prometheus text exposition format (version 0.0.4) for the
// metrics tests: every family has one `# HELP` and one `# TYPE` line before its samples and
// appears once, names and labels are well formed, values are numbers, counters end in
// _total (and gauges do not), no series repeats. It returns every sample by its series
// (`name{label="value",...}` as written), so the tests can compare values.
#pragma once

#include <cctype>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>

namespace kvtest {

struct Exposition {
  std::string error;                       // empty when the text is valid
  std::map<std::string, double> samples;   // series -> value
  std::map<std::string, std::string> types;  // family -> "counter" / "gauge"

  bool has(const std::string& series) const { return samples.count(series) != 0; }
  // The value of a series; a missing one is -1 (no kvpool value is negative).
  double at(const std::string& series) const {
    auto it = samples.find(series);
    return it == samples.end() ? -1 : it->second;
  }
  bool has_family(const std::string& family) const { return types.count(family) != 0; }
};

inline bool metric_name_ok(const std::string& n) {
  if (n.empty() || !(std::isalpha(static_cast<unsigned char>(n[0])) || n[0] == '_' || n[0] == ':')) return false;
  for (char c : n) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':')) return false;
  }
  return true;
}

inline bool label_name_ok(const std::string& n) {
  if (n.empty() || !(std::isalpha(static_cast<unsigned char>(n[0])) || n[0] == '_')) return false;
  if (n.rfind("__", 0) == 0) return false;  // reserved
  for (char c : n) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

inline bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

inline Exposition parse_exposition(const std::string& text) {
  Exposition e;
  auto fail = [&](size_t line, const std::string& why) {
    if (e.error.empty()) e.error = "line " + std::to_string(line) + ": " + why;
  };
  if (text.empty() || text.back() != '\n') fail(0, "the text does not end with a newline");
  std::set<std::string> helped, finished;
  std::string current;  // the family whose samples may follow
  std::istringstream in(text);
  std::string line;
  size_t no = 0;
  while (std::getline(in, line)) {
    ++no;
    if (line.empty()) {
      fail(no, "empty line");
      continue;
    }
    if (line[0] == '#') {
      std::istringstream words(line);
      std::string hash, kind, name;
      words >> hash >> kind >> name;
      if (kind == "HELP") {
        if (!metric_name_ok(name) || name.rfind("kvpool_", 0) != 0) fail(no, "bad family name " + name);
        if (helped.count(name) || e.types.count(name)) fail(no, "second HELP or HELP after TYPE for " + name);
        std::string rest;
        std::getline(words, rest);
        if (rest.size() < 2) fail(no, "empty HELP for " + name);
        helped.insert(name);
      } else if (kind == "TYPE") {
        std::string type, extra;
        words >> type >> extra;
        if (!helped.count(name)) fail(no, "TYPE without HELP for " + name);
        if (e.types.count(name)) fail(no, "second TYPE for " + name);
        if (type != "counter" && type != "gauge") fail(no, "unexpected type " + type);
        if (!extra.empty()) fail(no, "trailing text after TYPE");
        if (type == "counter" && !ends_with(name, "_total")) fail(no, "counter " + name + " does not end in _total");
        if (type == "gauge" && ends_with(name, "_total")) fail(no, "gauge " + name + " ends in _total");
        if (!current.empty()) finished.insert(current);
        if (finished.count(name)) fail(no, "family " + name + " appears twice");
        e.types[name] = type;
        current = name;
      } else {
        fail(no, "a comment that is neither HELP nor TYPE");
      }
      continue;
    }
    // name{label="value",...} value
    size_t at = 0;
    while (at < line.size() && line[at] != '{' && line[at] != ' ') ++at;
    const std::string name = line.substr(0, at);
    if (!metric_name_ok(name)) fail(no, "bad sample name " + name);
    if (name != current) fail(no, "sample " + name + " outside its family (current: " + current + ")");
    std::string series = name;
    if (at < line.size() && line[at] == '{') {
      const size_t open = at++;
      std::set<std::string> names;
      bool first = true;
      while (at < line.size() && line[at] != '}') {
        if (!first) {
          if (line[at] != ',') {
            fail(no, "labels not separated by a comma");
            break;
          }
          ++at;
        }
        first = false;
        size_t eq = line.find('=', at);
        if (eq == std::string::npos) {
          fail(no, "label without '='");
          break;
        }
        const std::string label = line.substr(at, eq - at);
        if (!label_name_ok(label)) fail(no, "bad label name " + label);
        if (!names.insert(label).second) fail(no, "label " + label + " twice");
        at = eq + 1;
        if (at >= line.size() || line[at] != '"') {
          fail(no, "label value not quoted");
          break;
        }
        ++at;
        while (at < line.size() && line[at] != '"') {
          if (line[at] == '\\') {
            if (at + 1 >= line.size() || (line[at + 1] != '\\' && line[at + 1] != '"' && line[at + 1] != 'n')) {
              fail(no, "bad escape in a label value");
            }
            ++at;
          }
          ++at;
        }
        if (at >= line.size()) {
          fail(no, "unterminated label value");
          break;
        }
        ++at;  // the closing quote
      }
      if (at >= line.size()) {
        fail(no, "unterminated label set");
        continue;
      }
      ++at;  // '}'
      series = line.substr(0, at);
      (void)open;
    }
    if (at >= line.size() || line[at] != ' ') {
      fail(no, "no space before the value");
      continue;
    }
    const std::string value = line.substr(at + 1);
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || end == nullptr || *end != '\0') fail(no, "value is not a number: " + value);
    if (!e.samples.emplace(series, v).second) fail(no, "series " + series + " twice");
  }
  for (const std::string& h : helped) {
    if (!e.types.count(h)) fail(no, "HELP without TYPE for " + h);
  }
  return e;
}

}  // namespace kvtest
