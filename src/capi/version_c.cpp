// C shims: the library's version.
#include "gpuflow.h"

extern "C" {

GF_API uint32_t gf_version(void) {
  return GF_VERSION;
}

GF_API const char *gf_version_string(void) {
#define GF_STR2(x) #x
#define GF_STR(x) GF_STR2(x)
  return GF_STR(GF_VERSION_MAJOR) "." GF_STR(GF_VERSION_MINOR) "." GF_STR(GF_VERSION_PATCH);
}

}  // extern "C"
