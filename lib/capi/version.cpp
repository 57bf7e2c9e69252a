#include "kvpool/version.h"

extern "C" {

KVPOOL_API uint32_t kvpool_version(void) { return KVPOOL_VERSION_NUMBER; }

KVPOOL_API const char* kvpool_version_string(void) { return KVPOOL_VERSION_STRING; }

}  // extern "C"
