// Test core: shared declarations.
//
// The test core is a stand-in for Triton's in-process library
// (libtritonserver.so) used only by this project's test suite. This header
// declares every exported TRITONSERVER_* function from the project's own
// X-macro list, the status type used inside the library (Triton's error codes
// and their names), the process-wide logger (Triton keeps one global logger
// whose settings are changed by the server-option setters) and small helpers
// shared by the other parts.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "native/core/triton_api.h"

#define TC_EXPORT __attribute__((visibility("default")))

extern "C" {
#define TC_DECLARE_API(minor, ret, name, params) \
  TC_EXPORT ret TRITONSERVER_##name params;
TRITON_API_FUNCTIONS(TC_DECLARE_API)
#undef TC_DECLARE_API
}

// The error object handed to callers. Real Triton keeps a code and a message;
// the caller owns it and frees it with TRITONSERVER_ErrorDelete.
struct TRITONSERVER_Error {
  TRITONSERVER_Error_Code code;
  std::string msg;
};

namespace tc {

// Status used inside the library. ok() when code_ is kOk.
class Status {
 public:
  static constexpr int kOk = -1;
  Status() = default;
  Status(TRITONSERVER_Error_Code code, std::string msg)
      : code_(static_cast<int>(code)), msg_(std::move(msg))
  {
  }
  bool ok() const { return code_ == kOk; }
  TRITONSERVER_Error_Code code() const
  {
    return static_cast<TRITONSERVER_Error_Code>(code_);
  }
  const std::string& msg() const { return msg_; }
  // "<code name>: <message>", as Triton prints statuses in logs and reasons.
  std::string AsString() const;
  TRITONSERVER_Error* ToError() const;  // nullptr when ok()

 private:
  int code_ = kOk;
  std::string msg_;
};

const char* CodeString(TRITONSERVER_Error_Code code);

#define TC_RETURN_IF_ERROR(X)        \
  do {                               \
    ::tc::Status s__ = (X);          \
    if (!s__.ok()) return s__;       \
  } while (false)

inline Status Err(TRITONSERVER_Error_Code c, std::string m)
{
  return Status(c, std::move(m));
}
inline TRITONSERVER_Error* NewError(TRITONSERVER_Error_Code c, std::string m)
{
  return new TRITONSERVER_Error{c, std::move(m)};
}
// A caller broke a contract of the C API that real Triton does not check
// but pays for with a crash (a server deleted under its backends, an object
// deleted twice): the test core stops the process at once, saying which.
[[noreturn]] void ContractViolation(const std::string& what);

// INVALID_ARG error for a null argument of an API function.
TRITONSERVER_Error* NullArg(const char* what);

// ---- logging (process-wide, like Triton's logger) ----
enum class LogLevel { kError = 0, kWarning = 1, kInfo = 2 };
bool LogIsEnabled(LogLevel level);
void LogSetEnabled(LogLevel level, bool on);
int LogVerboseLevel();
void LogSetVerbose(int level);
void LogSetFormat(TRITONSERVER_LogFormat format);
// Empty string on success, else an error message.
std::string LogSetFile(const std::string& path);
// Writes one record. 'escape' puts the message in JSON-string form like
// Triton does by default (TRITON_SERVER_ESCAPE_LOG_MESSAGES=0 disables it).
void LogWrite(
    LogLevel level, const char* file, int line, const std::string& msg,
    bool escape = true);

#define TC_LOG_INFO(FILE, LINE, MSG)                                    \
  do {                                                                  \
    if (::tc::LogIsEnabled(::tc::LogLevel::kInfo))                      \
      ::tc::LogWrite(::tc::LogLevel::kInfo, FILE, LINE, (MSG));         \
  } while (false)
#define TC_LOG_WARNING(FILE, LINE, MSG)                                 \
  do {                                                                  \
    if (::tc::LogIsEnabled(::tc::LogLevel::kWarning))                   \
      ::tc::LogWrite(::tc::LogLevel::kWarning, FILE, LINE, (MSG));      \
  } while (false)
#define TC_LOG_ERROR(FILE, LINE, MSG)                                   \
  do {                                                                  \
    if (::tc::LogIsEnabled(::tc::LogLevel::kError))                     \
      ::tc::LogWrite(::tc::LogLevel::kError, FILE, LINE, (MSG));        \
  } while (false)
#define TC_LOG_VERBOSE(L, FILE, LINE, MSG)                              \
  do {                                                                  \
    if (::tc::LogVerboseLevel() >= (L))                                 \
      ::tc::LogWrite(::tc::LogLevel::kInfo, FILE, LINE, (MSG));         \
  } while (false)

// An ASCII table like the ones Triton logs at start-up.
class Table {
 public:
  explicit Table(std::vector<std::string> headers);
  void AddRow(std::vector<std::string> row);
  std::string Print() const;  // starts with a newline like Triton's tables

 private:
  std::vector<std::vector<std::string>> rows_;
};
void LogTable(const char* file, int line, const Table& table);

// ---- data types ----
const char* DataTypeProtocolString(TRITONSERVER_DataType dtype);  // "FP32"
const char* DataTypeConfigString(TRITONSERVER_DataType dtype);    // "TYPE_FP32"
TRITONSERVER_DataType DataTypeFromConfigString(const std::string& s);
size_t DataTypeByteSize(TRITONSERVER_DataType dtype);  // 0 for BYTES
std::string DimsToString(const std::vector<int64_t>& dims);  // "[1,2]"

uint64_t NowNs();          // steady clock
uint64_t NowSinceEpochMs();  // system clock

// JSON string form of 's' including the quotes (rapidjson escaping rules).
std::string JsonQuote(const std::string& s);

}  // namespace tc
