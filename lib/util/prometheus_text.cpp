#include "util/prometheus_text.hpp"

namespace kvp::metrics {

void TextWriter::family(const char* name, Type type, const char* help) {
  name_ = name;
  text_ += "# HELP ";
  text_ += name;
  text_ += ' ';
  escaped(help, true);
  text_ += "\n# TYPE ";
  text_ += name;
  text_ += type == Type::kCounter ? " counter\n" : " gauge\n";
}

void TextWriter::sample(uint64_t value, std::initializer_list<Label> labels) {
  text_ += name_;
  if (labels.size() > 0) {
    text_ += '{';
    bool first = true;
    for (const Label& l : labels) {
      if (!first) text_ += ',';
      first = false;
      text_ += l.first;
      text_ += "=\"";
      escaped(l.second, false);
      text_ += '"';
    }
    text_ += '}';
  }
  text_ += ' ';
  text_ += std::to_string(value);
  text_ += '\n';
}

// HELP text escapes backslash and newline; label values also the double quote.
void TextWriter::escaped(const char* value, bool help) {
  for (const char* c = value; *c != '\0'; ++c) {
    switch (*c) {
      case '\\': text_ += "\\\\"; break;
      case '\n': text_ += "\\n"; break;
      case '"':
        if (help) {
          text_ += '"';
        } else {
          text_ += "\\\"";
        }
        break;
      default: text_ += *c;
    }
  }
}

}  // namespace kvp::metrics
