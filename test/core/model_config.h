// Test core: model configuration.
//
// Imitates how Triton reads, completes and prints a model configuration:
// a schema of Triton's ModelConfig message (fields in declaration order),
// a reader for the protobuf text format used by config.pbtxt, a reader for
// the JSON form accepted as a load "config" override, the JSON printer used
// by TRITONSERVER_ServerModelConfig (every scalar printed with its default,
// unset sub-messages omitted, 64-bit integers printed as strings except the
// fields Triton converts back to numbers), and Triton's normalization and
// validation steps with their error messages.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common.h"
#include "json.h"

namespace tc {

enum class FT {
  kString,
  kBool,
  kInt32,
  kUInt32,
  kInt64,
  kUInt64,
  kFloat,
  kDouble,
  kEnum,
  kMessage
};

struct EnumDesc {
  std::vector<std::pair<std::string, int>> values;
  const char* NameOf(int v) const;
  bool Find(const std::string& name, bool case_insensitive, int* v) const;
};

struct MsgDesc;

struct FieldDesc {
  std::string name;
  std::string json_name;
  FT type = FT::kString;
  bool repeated = false;
  bool map = false;  // repeated entries of 'msg' (a key/value entry)
  const MsgDesc* msg = nullptr;
  const EnumDesc* en = nullptr;
  int oneof = -1;
  bool num64 = false;  // 64-bit value printed as a JSON number by Triton
};

struct MsgDesc {
  std::string name;
  std::vector<FieldDesc> fields;
  std::vector<std::string> oneofs;
  int Find(const std::string& name) const;  // proto or JSON name, -1 if none
};

// A generic message value.
struct PMsg;
struct PVal {
  int64_t i = 0;  // int32/int64/enum/bool
  uint64_t u = 0;  // uint32/uint64
  double d = 0;   // float/double
  std::string s;  // string
};
struct PField {
  bool set = false;
  std::vector<PVal> vals;  // scalars
  std::vector<PMsg> msgs;  // messages (map entries too)
};
struct PMsg {
  const MsgDesc* desc = nullptr;
  std::vector<PField> f;
  PMsg() = default;
  explicit PMsg(const MsgDesc* d) : desc(d), f(d->fields.size()) {}

  // Accessors by field name (the name must exist in the schema).
  const PField& Field(const std::string& name) const;
  PField& Field(const std::string& name);
  bool Has(const std::string& name) const { return Field(name).set; }
  std::string Str(const std::string& name) const;
  int64_t Int(const std::string& name) const;   // int/enum/bool
  uint64_t UInt(const std::string& name) const;
  bool Bool(const std::string& name) const { return Int(name) != 0; }
  double Dbl(const std::string& name) const;
  // Sub-message; nullptr when not set.
  const PMsg* Msg(const std::string& name) const;
  // Mutable sub-message, created (and marked set) when missing.
  PMsg& MutMsg(const std::string& name);
  void SetStr(const std::string& name, const std::string& v);
  void SetInt(const std::string& name, int64_t v);
  void SetUInt(const std::string& name, uint64_t v);
  void Clear(const std::string& name);
  std::vector<int64_t> Ints(const std::string& name) const;  // repeated ints
  std::vector<std::string> Strs(const std::string& name) const;
  const std::vector<PMsg>& Msgs(const std::string& name) const
  {
    return Field(name).msgs;
  }
  std::vector<PMsg>& MutMsgs(const std::string& name);
};

const MsgDesc* ModelConfigDesc();

// config.pbtxt text -> message. Error text describes the first problem.
Status ParseTextProto(const std::string& text, PMsg* out);
// JSON (as accepted by protobuf's JSON parser) -> message.
Status ParseJsonMessage(const json::Value& v, const MsgDesc* desc, PMsg* out);
// Message -> Triton's model-config JSON (config_version 1).
json::Value ConfigToJson(const PMsg& m);

// ---- Triton's config handling steps ----
// Auto-complete of backend fields and normalization done when a model
// directory is polled (name, python default file, version policy,
// preferred batch sizes, pinned memory, sequence idle default).
Status NormalizeConfig(
    const std::string& model_name, const std::string& model_path,
    PMsg* config);
Status ValidateConfig(const PMsg& config);    // ValidateModelConfig
Status ValidateIOConfig(const PMsg& config);  // ValidateModelIOConfig
// Instance-group normalization and validation done when the model loads.
Status NormalizeAndValidateInstanceGroups(PMsg* config);

// Typed view of a normalized configuration.
struct IOSpec {
  std::string name;
  TRITONSERVER_DataType dtype = TRITONSERVER_TYPE_INVALID;
  std::vector<int64_t> dims;
  bool optional = false;
  bool has_reshape = false;
  std::vector<int64_t> reshape;
  bool is_shape_tensor = false;
};

struct ModelSpec {
  std::string name, platform, backend;
  int64_t max_batch_size = 0;
  std::vector<IOSpec> inputs, outputs;
  bool decoupled = false;
  bool dynamic_batching = false;
  bool sequence_batching = false;
  int instance_count = 1;
  std::vector<std::string> instance_names;
  // dynamic batching queue settings
  uint64_t priority_levels = 0;
  uint64_t default_priority_level = 0;
  uint64_t default_timeout_us = 0;
  bool allow_timeout_override = false;
  uint32_t max_queue_size = 0;
  int timeout_action = 0;  // 0 REJECT, 1 DELAY
  std::map<std::string, std::string> parameters;

  const IOSpec* Input(const std::string& n) const;
  const IOSpec* Output(const std::string& n) const;
  size_t RequiredInputCount() const;
};

ModelSpec SpecFromConfig(const PMsg& config);

}  // namespace tc
