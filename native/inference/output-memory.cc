// Triton's response allocator (its threads): where an output goes, a
// block of the pool (output-memory.h) or the caller's own memory.
#include <string>

#include "inference-internal.h"
#include "output-memory.h"

namespace tsn {

TRITONSERVER_Error* InferenceEngine::Allocate(
    TRITONSERVER_ResponseAllocator*, const char* tensor_name, size_t byte_size,
    TRITONSERVER_MemoryType, int64_t, void* userp, void** buffer,
    void** buffer_userp, TRITONSERVER_MemoryType* actual_memory_type,
    int64_t* actual_memory_type_id) {
  // Host memory whatever was asked for: JS can only read host memory.
  *actual_memory_type = TRITONSERVER_MEMORY_CPU;
  *actual_memory_type_id = 0;
  *buffer = nullptr;
  *buffer_userp = nullptr;
  if (byte_size == 0) return nullptr;
  auto* request = static_cast<Request*>(userp);
  for (const Request::CallerBuffer& given : request->caller_buffers) {
    if (given.name != tensor_name) continue;
    if (byte_size <= given.size) {
      *buffer = given.data;
      *buffer_userp = &kCallerMemory;
      return nullptr;
    }
    if (given.fallback) break;
    if (given.shared_memory)
      return request->engine->api_.ErrorNew(
          TRITONSERVER_ERROR_INTERNAL,
          SharedMemoryTooSmall(tensor_name, given.size, byte_size).c_str());
    return request->engine->api_.ErrorNew(
        TRITONSERVER_ERROR_INVALID_ARG,
        (std::string("output '") + tensor_name + "' is " +
         std::to_string(byte_size) + " bytes; the buffer given for it holds " +
         std::to_string(given.size))
            .c_str());
  }
  BufferHeader* header = BlockPool::Get().Take(byte_size);
  if (header == nullptr) {
    const TritonApi& api = static_cast<Request*>(userp)->engine->api_;
    return api.ErrorNew(TRITONSERVER_ERROR_INTERNAL,
                        (std::string("out of memory allocating output '") +
                         tensor_name + "'")
                            .c_str());
  }
  *buffer = reinterpret_cast<char*>(header) + kHeaderSize;
  *buffer_userp = header;
  return nullptr;
}

TRITONSERVER_Error* InferenceEngine::ReleaseBuffer(
    TRITONSERVER_ResponseAllocator*, void*, void* buffer_userp, size_t,
    TRITONSERVER_MemoryType, int64_t) {
  if (buffer_userp == &kCallerMemory) return nullptr;  // the caller's own
  auto* header = static_cast<BufferHeader*>(buffer_userp);
  if (header != nullptr && !header->adopted) FreeBlock(header);
  return nullptr;
}

TRITONSERVER_Error* InferenceEngine::Query(TRITONSERVER_ResponseAllocator*,
                                           void*, const char*, size_t*,
                                           TRITONSERVER_MemoryType* memory_type,
                                           int64_t* memory_type_id) {
  *memory_type = TRITONSERVER_MEMORY_CPU;
  *memory_type_id = 0;
  return nullptr;
}

}  // namespace tsn
