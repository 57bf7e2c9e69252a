// Status: how errors travel inside the library. The C boundary (capi/) turns
// a Status into a kvpool_status return value plus the thread-local message.
#pragma once

#include <string>
#include <utility>

#include "kvpool/status.h"

namespace kvp {

class Status {
 public:
  Status() = default;
  Status(kvpool_status code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }
  static Status invalid(std::string m) { return {KVPOOL_ERR_INVALID_ARGUMENT, std::move(m)}; }
  static Status config(std::string m) { return {KVPOOL_ERR_CONFIG, std::move(m)}; }
  static Status out_of_memory(std::string m) { return {KVPOOL_ERR_OUT_OF_MEMORY, std::move(m)}; }
  static Status cuda(std::string m) { return {KVPOOL_ERR_CUDA, std::move(m)}; }
  static Status unsupported(std::string m) { return {KVPOOL_ERR_UNSUPPORTED, std::move(m)}; }
  static Status internal(std::string m) { return {KVPOOL_ERR_INTERNAL, std::move(m)}; }
  static Status io(std::string m) { return {KVPOOL_ERR_IO, std::move(m)}; }

  bool is_ok() const { return code_ == KVPOOL_OK; }
  kvpool_status code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  kvpool_status code_ = KVPOOL_OK;
  std::string message_;
};

// Propagate a non-OK Status to the caller.
#define KVPOOL_RETURN_IF_ERROR(expr)            \
  do {                                          \
    ::kvp::Status _kvpool_st = (expr);       \
    if (!_kvpool_st.is_ok()) return _kvpool_st; \
  } while (0)

}  // namespace kvpool
