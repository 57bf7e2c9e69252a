// Strict, path-aware reading of one JSON object with cJSON.
//
// Each getter consumes one key; finish() then rejects every key nobody asked
// for, so typos in a configuration are errors rather than silently ignored.
// Messages name the JSON path, the value found and what was expected, e.g.
//   $.pool.page_size: got 12, expected a power of two in [1, 65536]
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "util/status.hpp"

struct cJSON;

namespace kvp::config {

class JsonReader {
 public:
  // `object` must be a JSON object; `path` is its JSONPath ("$" for the root).
  JsonReader(const cJSON* object, std::string path);

  const std::string& path() const { return path_; }
  std::string path_of(const char* key) const { return path_ + "." + key; }
  bool has(const char* key) const;

  // Integer in [min, max]. Absent: *out untouched, returns OK (or an error if required).
  Status get_int(const char* key, int64_t min, int64_t max, bool required, std::optional<int64_t>* out);
  // Number in (min, max] if min_exclusive, else [min, max].
  Status get_number(const char* key, double min, double max, bool min_exclusive, bool required,
                    std::optional<double>* out);
  Status get_bool(const char* key, bool required, std::optional<bool>* out);
  Status get_string(const char* key, bool required, std::optional<std::string>* out);
  // String restricted to `choices`.
  Status get_choice(const char* key, std::initializer_list<const char*> choices, bool required,
                    std::optional<std::string>* out);
  // Array of integers, each in [min, max]; `distinct` rejects repeated values.
  Status get_int_array(const char* key, int64_t min, int64_t max, bool distinct, bool required,
                       std::optional<std::vector<int64_t>>* out);
  // Array of non-empty strings.
  Status get_string_array(const char* key, bool required, std::optional<std::vector<std::string>>* out);
  // Nested object; *out is NULL when absent.
  Status get_object(const char* key, bool required, const cJSON** out);

  // Error for every key of the object that no getter consumed.
  Status finish() const;

  // Error helper: "<path>.<key>: got <value>, expected <what>".
  Status error_at(const char* key, const std::string& got, const std::string& expected) const;

 private:
  const cJSON* find(const char* key);
  const cJSON* object_;
  std::string path_;
  std::set<std::string> consumed_;
};

// Renders a JSON value briefly for error messages (strings quoted, long values cut).
std::string describe_json_value(const cJSON* value);

}  // namespace kvp::config
