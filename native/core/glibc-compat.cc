// Linked into the prebuilds only (binding.gyp's static_cxx_runtime). The
// static libstdc++ of GCC 12 was built against glibc 2.36: its
// std::random_device (pulled in with the locale code; the addon never makes
// one) calls arc4random, new in glibc 2.36. Defined here, hidden, the addon
// needs glibc 2.34 only. It is a real arc4random, from getrandom (glibc 2.25).
#include <sys/random.h>

#include <cerrno>
#include <cstdint>

extern "C" __attribute__((visibility("hidden"))) uint32_t arc4random(void) noexcept {
  uint32_t value;
  for (;;) {
    ssize_t n = getrandom(&value, sizeof value, 0);
    if (n == static_cast<ssize_t>(sizeof value)) return value;
    // glibc's own arc4random aborts too when the kernel has no entropy call.
    if (n < 0 && errno != EINTR) __builtin_trap();
  }
}
