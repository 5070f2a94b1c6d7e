{
  "variables": {
    # 1 for the prebuilds (GYP_DEFINES in package.json's prebuild scripts):
    # libstdc++ linked in, so they load where it is older than the
    # compiler's (RHEL 9 has GCC 11's). 0 for local and fallback builds.
    "static_cxx_runtime%": 0
  },
  "targets": [
    {
      "target_name": "tritonserver_node",
      "sources": [
        "native/addon.cc",
        "native/backend/backend.cc",
        "native/client/grpc-channel.cc",
        "native/client/http-channel.cc",
        "native/client/http-response.cc",
        "native/client/loop-channel.cc",
        "native/core/blocking.cc",
        "native/core/errors.cc",
        "native/core/loader.cc",
        "native/core/nghttp2-api.cc",
        "native/core/openssl-api.cc",
        "native/core/probe.cc",
        "native/core/server.cc",
        "native/core/shared-memory.cc",
        "native/core/tls-session.cc",
        "native/core/zlib-api.cc",
        "native/inference/completions.cc",
        "native/inference/drain.cc",
        "native/inference/inference.cc",
        "native/inference/output-memory.cc",
        "native/inference/request.cc",
        "native/inference/submit.cc",
        "native/kserve/grpc-frontend.cc",
        "native/kserve/grpc-wire.cc",
        "native/kserve/http-frontend.cc",
        "native/kserve/http-wire.cc",
        "native/observability/logging.cc",
        "native/observability/metrics.cc",
        "native/observability/trace.cc",
        "native/server-wrap.cc"
      ],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NODE_ADDON_API_DISABLE_DEPRECATED", "NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti"],
      "cflags_cc": ["-std=c++17", "-fexceptions", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter"],
      "libraries": ["-ldl"],
      "conditions": [
        ["OS=='linux' and static_cxx_runtime==1", {
          # libstdc++ linked in and, by the version script, local: the addon
          # binds to its own copy and neither exports it nor takes the
          # process's. libgcc_s stays shared: Node itself needs it (GCC 12's
          # static unwinder, built on glibc 2.36, would need glibc 2.35).
          "ldflags": ["-static-libstdc++", "-Wl,--version-script=<(module_root_dir)/native/core/exports.map"],
          "sources": ["native/core/glibc-compat.cc"]
        }],
        ["OS=='mac'", {
          "xcode_settings": {
            "GCC_ENABLE_CPP_EXCEPTIONS": "YES",
            "CLANG_CXX_LANGUAGE_STANDARD": "c++17",
            "GCC_TREAT_WARNINGS_AS_ERRORS": "YES"
          }
        }]
      ]
    }
  ]
}
