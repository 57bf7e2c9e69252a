#include "config/json_reader.hpp"

#include <cjson/cJSON.h>

#include <cmath>
#include <sstream>

namespace kvp::config {
namespace {

std::string format_number(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

std::string range_text(int64_t min, int64_t max) {
  return "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
}

// JSON numbers are doubles in cJSON; an integer must be exactly integral and
// inside the range where doubles represent every integer.
bool as_integer(const cJSON* v, int64_t* out) {
  if (!cJSON_IsNumber(v)) return false;
  double d = v->valuedouble;
  if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9007199254740992.0) return false;
  *out = static_cast<int64_t>(d);
  return true;
}

}  // namespace

std::string describe_json_value(const cJSON* value) {
  if (value == nullptr) return "nothing";
  if (cJSON_IsString(value)) return std::string("\"") + value->valuestring + "\"";
  if (cJSON_IsNumber(value)) return format_number(value->valuedouble);
  if (cJSON_IsBool(value)) return cJSON_IsTrue(value) ? "true" : "false";
  if (cJSON_IsNull(value)) return "null";
  if (cJSON_IsArray(value)) return "an array";
  if (cJSON_IsObject(value)) return "an object";
  return "an invalid value";
}

JsonReader::JsonReader(const cJSON* object, std::string path) : object_(object), path_(std::move(path)) {}

bool JsonReader::has(const char* key) const {
  return cJSON_GetObjectItemCaseSensitive(object_, key) != nullptr;
}

const cJSON* JsonReader::find(const char* key) {
  consumed_.insert(key);
  return cJSON_GetObjectItemCaseSensitive(object_, key);
}

Status JsonReader::error_at(const char* key, const std::string& got, const std::string& expected) const {
  return Status::config(path_of(key) + ": got " + got + ", expected " + expected);
}

Status JsonReader::get_int(const char* key, int64_t min, int64_t max, bool required,
                           std::optional<int64_t>* out) {
  const std::string expected = "an integer in " + range_text(min, max);
  const cJSON* v = find(key);
  if (v == nullptr) return required ? Status::config(path_of(key) + ": missing, expected " + expected) : Status::ok();
  int64_t i = 0;
  if (!as_integer(v, &i) || i < min || i > max) return error_at(key, describe_json_value(v), expected);
  *out = i;
  return Status::ok();
}

Status JsonReader::get_number(const char* key, double min, double max, bool min_exclusive, bool required,
                              std::optional<double>* out) {
  const std::string expected = std::string("a number in ") + (min_exclusive ? "(" : "[") + format_number(min) +
                               ", " + format_number(max) + "]";
  const cJSON* v = find(key);
  if (v == nullptr) return required ? Status::config(path_of(key) + ": missing, expected " + expected) : Status::ok();
  if (!cJSON_IsNumber(v) || !std::isfinite(v->valuedouble)) return error_at(key, describe_json_value(v), expected);
  double d = v->valuedouble;
  bool below = min_exclusive ? d <= min : d < min;
  if (below || d > max) return error_at(key, describe_json_value(v), expected);
  *out = d;
  return Status::ok();
}

Status JsonReader::get_bool(const char* key, bool required, std::optional<bool>* out) {
  const cJSON* v = find(key);
  if (v == nullptr) return required ? Status::config(path_of(key) + ": missing, expected true or false") : Status::ok();
  if (!cJSON_IsBool(v)) return error_at(key, describe_json_value(v), "true or false");
  *out = cJSON_IsTrue(v) != 0;
  return Status::ok();
}

Status JsonReader::get_string(const char* key, bool required, std::optional<std::string>* out) {
  const cJSON* v = find(key);
  if (v == nullptr) return required ? Status::config(path_of(key) + ": missing, expected a string") : Status::ok();
  if (!cJSON_IsString(v)) return error_at(key, describe_json_value(v), "a string");
  *out = std::string(v->valuestring);
  return Status::ok();
}

Status JsonReader::get_choice(const char* key, std::initializer_list<const char*> choices, bool required,
                              std::optional<std::string>* out) {
  std::string expected = "one of";
  const char* sep = " ";
  for (const char* c : choices) {
    expected += sep + std::string("\"") + c + "\"";
    sep = ", ";
  }
  const cJSON* v = find(key);
  if (v == nullptr) return required ? Status::config(path_of(key) + ": missing, expected " + expected) : Status::ok();
  if (cJSON_IsString(v)) {
    for (const char* c : choices) {
      if (std::string(v->valuestring) == c) {
        *out = std::string(c);
        return Status::ok();
      }
    }
  }
  return error_at(key, describe_json_value(v), expected);
}

Status JsonReader::get_int_array(const char* key, int64_t min, int64_t max, bool distinct, bool required,
                                 std::optional<std::vector<int64_t>>* out) {
  const std::string expected = std::string("an array of ") + (distinct ? "distinct " : "") + "integers in " +
                               range_text(min, max);
  const cJSON* v = find(key);
  if (v == nullptr) return required ? Status::config(path_of(key) + ": missing, expected " + expected) : Status::ok();
  if (!cJSON_IsArray(v)) return error_at(key, describe_json_value(v), expected);
  std::vector<int64_t> values;
  std::set<int64_t> seen;
  int index = 0;
  for (const cJSON* item = v->child; item != nullptr; item = item->next, ++index) {
    const std::string item_path = path_of(key) + "[" + std::to_string(index) + "]";
    int64_t i = 0;
    if (!as_integer(item, &i) || i < min || i > max) {
      return Status::config(item_path + ": got " + describe_json_value(item) + ", expected an integer in " +
                            range_text(min, max));
    }
    if (distinct && !seen.insert(i).second) {
      return Status::config(item_path + ": got " + std::to_string(i) + " again, expected each value once");
    }
    values.push_back(i);
  }
  *out = std::move(values);
  return Status::ok();
}

Status JsonReader::get_string_array(const char* key, bool required, std::optional<std::vector<std::string>>* out) {
  const char* expected = "an array of non-empty strings";
  const cJSON* v = find(key);
  if (v == nullptr) return required ? Status::config(path_of(key) + ": missing, expected " + expected) : Status::ok();
  if (!cJSON_IsArray(v)) return error_at(key, describe_json_value(v), expected);
  std::vector<std::string> values;
  int index = 0;
  for (const cJSON* item = v->child; item != nullptr; item = item->next, ++index) {
    if (!cJSON_IsString(item) || item->valuestring == nullptr || item->valuestring[0] == '\0') {
      return Status::config(path_of(key) + "[" + std::to_string(index) + "]: got " + describe_json_value(item) +
                            ", expected a non-empty string");
    }
    values.emplace_back(item->valuestring);
  }
  *out = std::move(values);
  return Status::ok();
}

Status JsonReader::get_object(const char* key, bool required, const cJSON** out) {
  *out = nullptr;
  const cJSON* v = find(key);
  if (v == nullptr) return required ? Status::config(path_of(key) + ": missing, expected an object") : Status::ok();
  if (!cJSON_IsObject(v)) return error_at(key, describe_json_value(v), "an object");
  *out = v;
  return Status::ok();
}

Status JsonReader::finish() const {
  std::set<std::string> seen;
  for (const cJSON* item = object_->child; item != nullptr; item = item->next) {
    const char* name = item->string != nullptr ? item->string : "";
    if (!seen.insert(name).second) {
      return Status::config(path_ + "." + name + ": key given twice, expected each key once");
    }
    if (consumed_.count(name) == 0) {
      std::string known;
      for (const std::string& k : consumed_) known += (known.empty() ? "" : ", ") + k;
      return Status::config(path_ + "." + name + ": unknown key, expected one of: " + known);
    }
  }
  return Status::ok();
}

}  // namespace kvp::config
