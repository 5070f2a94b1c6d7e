// Test core: statuses, logging, tables and data-type helpers.
//
// Imitates Triton's status strings (code names such as "Invalid argument";
// note that Triton has no name for CANCELLED and prints "<invalid code>"),
// and its global logger: one process-wide set of enabled levels, verbose
// level, format and optional log file (opened in append mode at the moment
// the option is set). Records look like
//   I1129 16:00:00.123456 1234 model_lifecycle.cc:849] "successfully loaded 'm'"
// (level letter, UTC month/day and time with microseconds, process id,
// source file:line, then the message as a JSON string). Without a log file
// info records go to stdout and warnings/errors to stderr, as in Triton.
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common.h"

namespace tc {

void
ContractViolation(const std::string& what)
{
  std::fprintf(stderr, "test core: contract violation: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}


const char*
CodeString(TRITONSERVER_Error_Code code)
{
  switch (code) {
    case TRITONSERVER_ERROR_UNKNOWN:
      return "Unknown";
    case TRITONSERVER_ERROR_INTERNAL:
      return "Internal";
    case TRITONSERVER_ERROR_NOT_FOUND:
      return "Not found";
    case TRITONSERVER_ERROR_INVALID_ARG:
      return "Invalid argument";
    case TRITONSERVER_ERROR_UNAVAILABLE:
      return "Unavailable";
    case TRITONSERVER_ERROR_UNSUPPORTED:
      return "Unsupported";
    case TRITONSERVER_ERROR_ALREADY_EXISTS:
      return "Already exists";
    default:
      // Triton's code-name table has no entry for CANCELLED.
      return "<invalid code>";
  }
}

std::string
Status::AsString() const
{
  if (ok()) {
    return "OK";
  }
  return std::string(CodeString(code())) + ": " + msg_;
}

TRITONSERVER_Error*
Status::ToError() const
{
  if (ok()) {
    return nullptr;
  }
  return NewError(code(), msg_);
}

TRITONSERVER_Error*
NullArg(const char* what)
{
  return NewError(
      TRITONSERVER_ERROR_INVALID_ARG,
      std::string("test core: argument '") + what + "' must not be null");
}

// ---------------------------------------------------------------------------
// Logger
// ---------------------------------------------------------------------------
namespace {

struct Logger {
  std::mutex mu;
  std::atomic<bool> enabled[3] = {{true}, {true}, {true}};
  std::atomic<int> verbose{0};
  std::atomic<int> format{TRITONSERVER_LOG_DEFAULT};
  std::string filename;
  std::ofstream file;
  bool escape = true;
  Logger()
  {
    const char* v = std::getenv("TRITON_SERVER_ESCAPE_LOG_MESSAGES");
    escape = !(v != nullptr && std::strcmp(v, "0") == 0);
  }
};

Logger&
GetLogger()
{
  static Logger* logger = new Logger();  // never destroyed: used at exit
  return *logger;
}

}  // namespace

bool
LogIsEnabled(LogLevel level)
{
  return GetLogger().enabled[static_cast<int>(level)].load();
}

void
LogSetEnabled(LogLevel level, bool on)
{
  GetLogger().enabled[static_cast<int>(level)] = on;
}

int
LogVerboseLevel()
{
  return GetLogger().verbose.load();
}

void
LogSetVerbose(int level)
{
  GetLogger().verbose = level < 0 ? 0 : level;
}

void
LogSetFormat(TRITONSERVER_LogFormat format)
{
  GetLogger().format = static_cast<int>(format);
}

std::string
LogSetFile(const std::string& path)
{
  Logger& l = GetLogger();
  std::lock_guard<std::mutex> lk(l.mu);
  l.file.close();
  l.file.clear();
  const std::string previous = l.filename;
  l.filename = path;
  if (!path.empty()) {
    l.file.open(path, std::ios::app);
    if (l.file.fail()) {
      const int err = errno;
      l.file.clear();
      l.filename = previous;
      if (!previous.empty()) {
        l.file.open(previous, std::ios::app);
      }
      return std::string("Failed to open log file: ") + std::strerror(err);
    }
  }
  return std::string();
}

void
LogWrite(
    LogLevel level, const char* file, int line, const std::string& msg,
    bool escape)
{
  Logger& l = GetLogger();
  struct timeval tv;
  gettimeofday(&tv, nullptr);
  struct tm tm_time;
  time_t secs = tv.tv_sec;
  gmtime_r(&secs, &tm_time);
  static const char kLevel[] = {'E', 'W', 'I'};
  char ts[64];
  std::ostringstream rec;
  if (l.format.load() == TRITONSERVER_LOG_ISO8601) {
    snprintf(
        ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02dZ",
        tm_time.tm_year + 1900, tm_time.tm_mon + 1, tm_time.tm_mday,
        tm_time.tm_hour, tm_time.tm_min, tm_time.tm_sec);
    rec << ts << ' ' << kLevel[static_cast<int>(level)] << ' ';
  } else {
    snprintf(
        ts, sizeof(ts), "%02d%02d %02d:%02d:%02d.%06ld", tm_time.tm_mon + 1,
        tm_time.tm_mday, tm_time.tm_hour, tm_time.tm_min, tm_time.tm_sec,
        static_cast<long>(tv.tv_usec));
    rec << kLevel[static_cast<int>(level)] << ts << ' ';
  }
  rec << static_cast<uint32_t>(getpid()) << ' ' << file << ':' << line
      << "] ";
  rec << ((escape && l.escape) ? JsonQuote(msg) : msg);

  std::lock_guard<std::mutex> lk(l.mu);
  if (l.file.is_open()) {
    l.file << rec.str() << std::endl;
  } else if (level == LogLevel::kInfo) {
    std::cout << rec.str() << std::endl;
  } else {
    std::cerr << rec.str() << std::endl;
  }
}

// ---------------------------------------------------------------------------
// Table
// ---------------------------------------------------------------------------
Table::Table(std::vector<std::string> headers)
{
  rows_.push_back(std::move(headers));
}

void
Table::AddRow(std::vector<std::string> row)
{
  row.resize(rows_[0].size());
  rows_.push_back(std::move(row));
}

namespace {
std::vector<std::string>
SplitLines(const std::string& s)
{
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == '\n') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty() || out.empty()) {
    out.push_back(cur);
  }
  return out;
}
}  // namespace

std::string
Table::Print() const
{
  const size_t ncol = rows_[0].size();
  std::vector<size_t> width(ncol, 0);
  for (const auto& row : rows_) {
    for (size_t c = 0; c < ncol; ++c) {
      for (const auto& l : SplitLines(row[c])) {
        width[c] = std::max(width[c], l.size());
      }
    }
  }
  std::string divider = "+";
  for (size_t c = 0; c < ncol; ++c) {
    divider += std::string(width[c] + 2, '-') + "+";
  }
  divider += "\n";
  auto print_row = [&](const std::vector<std::string>& row) {
    std::vector<std::vector<std::string>> cells;
    size_t height = 1;
    for (size_t c = 0; c < ncol; ++c) {
      cells.push_back(SplitLines(row[c]));
      height = std::max(height, cells.back().size());
    }
    std::string out;
    for (size_t h = 0; h < height; ++h) {
      out += "|";
      for (size_t c = 0; c < ncol; ++c) {
        std::string cell = h < cells[c].size() ? cells[c][h] : "";
        cell.resize(width[c], ' ');
        out += " " + cell + " |";
      }
      out += "\n";
    }
    return out;
  };
  std::string t = "\n" + divider + print_row(rows_[0]) + divider;
  for (size_t r = 1; r < rows_.size(); ++r) {
    t += print_row(rows_[r]);
  }
  t += divider;
  return t;
}

void
LogTable(const char* file, int line, const Table& table)
{
  if (LogIsEnabled(LogLevel::kInfo)) {
    LogWrite(LogLevel::kInfo, file, line, table.Print(), false /* escape */);
  }
}

// ---------------------------------------------------------------------------
// Data types and time
// ---------------------------------------------------------------------------
const char*
DataTypeProtocolString(TRITONSERVER_DataType dtype)
{
  switch (dtype) {
    case TRITONSERVER_TYPE_BOOL:
      return "BOOL";
    case TRITONSERVER_TYPE_UINT8:
      return "UINT8";
    case TRITONSERVER_TYPE_UINT16:
      return "UINT16";
    case TRITONSERVER_TYPE_UINT32:
      return "UINT32";
    case TRITONSERVER_TYPE_UINT64:
      return "UINT64";
    case TRITONSERVER_TYPE_INT8:
      return "INT8";
    case TRITONSERVER_TYPE_INT16:
      return "INT16";
    case TRITONSERVER_TYPE_INT32:
      return "INT32";
    case TRITONSERVER_TYPE_INT64:
      return "INT64";
    case TRITONSERVER_TYPE_FP16:
      return "FP16";
    case TRITONSERVER_TYPE_FP32:
      return "FP32";
    case TRITONSERVER_TYPE_FP64:
      return "FP64";
    case TRITONSERVER_TYPE_BYTES:
      return "BYTES";
    case TRITONSERVER_TYPE_BF16:
      return "BF16";
    default:
      return "<invalid>";
  }
}

namespace {
const char* const kConfigTypeNames[] = {
    "TYPE_INVALID", "TYPE_BOOL",  "TYPE_UINT8",  "TYPE_UINT16", "TYPE_UINT32",
    "TYPE_UINT64",  "TYPE_INT8",  "TYPE_INT16",  "TYPE_INT32",  "TYPE_INT64",
    "TYPE_FP16",    "TYPE_FP32",  "TYPE_FP64",   "TYPE_STRING", "TYPE_BF16"};
}

const char*
DataTypeConfigString(TRITONSERVER_DataType dtype)
{
  const int i = static_cast<int>(dtype);
  if (i < 0 || i > 14) {
    return "TYPE_INVALID";
  }
  return kConfigTypeNames[i];
}

TRITONSERVER_DataType
DataTypeFromConfigString(const std::string& s)
{
  for (int i = 0; i <= 14; ++i) {
    if (s == kConfigTypeNames[i]) {
      return static_cast<TRITONSERVER_DataType>(i);
    }
  }
  return TRITONSERVER_TYPE_INVALID;
}

size_t
DataTypeByteSize(TRITONSERVER_DataType dtype)
{
  switch (dtype) {
    case TRITONSERVER_TYPE_BOOL:
    case TRITONSERVER_TYPE_INT8:
    case TRITONSERVER_TYPE_UINT8:
      return 1;
    case TRITONSERVER_TYPE_INT16:
    case TRITONSERVER_TYPE_UINT16:
    case TRITONSERVER_TYPE_FP16:
    case TRITONSERVER_TYPE_BF16:
      return 2;
    case TRITONSERVER_TYPE_INT32:
    case TRITONSERVER_TYPE_UINT32:
    case TRITONSERVER_TYPE_FP32:
      return 4;
    case TRITONSERVER_TYPE_INT64:
    case TRITONSERVER_TYPE_UINT64:
    case TRITONSERVER_TYPE_FP64:
      return 8;
    default:
      return 0;
  }
}

std::string
DimsToString(const std::vector<int64_t>& dims)
{
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) {
      s += ",";
    }
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

uint64_t
NowNs()
{
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint64_t
NowSinceEpochMs()
{
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace tc
