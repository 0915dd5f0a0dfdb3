#include "providers/curl_library.hpp"

#include <dlfcn.h>

#include <string>

namespace passepartout {
namespace {

struct Loaded {
  CurlLibrary library{};
  bool ok = false;
  std::string error;
};

template <class F>
bool resolve(void* handle, const char* name, F& out, std::string& error) {
  void* symbol = ::dlsym(handle, name);
  if (symbol == nullptr) {
    error = std::string("libcurl.so.4 has no ") + name;
    return false;
  }
  out = reinterpret_cast<F>(symbol);  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast): dlsym's contract
  return true;
}

Loaded load() {
  Loaded loaded;
  // Never closed: curl's threads and atexit handlers may outlive any owner.
  void* handle = ::dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    loaded.error = std::string("cannot load libcurl (install the libcurl4 package): ") + (why ? why : "dlopen failed");
    return loaded;
  }
  CurlLibrary& c = loaded.library;
  std::string& e = loaded.error;
  const bool all = resolve(handle, "curl_global_init", c.global_init, e) &&
                   resolve(handle, "curl_easy_init", c.easy_init, e) &&
                   resolve(handle, "curl_easy_cleanup", c.easy_cleanup, e) &&
                   resolve(handle, "curl_easy_setopt", c.easy_setopt, e) &&
                   resolve(handle, "curl_easy_getinfo", c.easy_getinfo, e) &&
                   resolve(handle, "curl_easy_strerror", c.easy_strerror, e) &&
                   resolve(handle, "curl_multi_init", c.multi_init, e) &&
                   resolve(handle, "curl_multi_cleanup", c.multi_cleanup, e) &&
                   resolve(handle, "curl_multi_setopt", c.multi_setopt, e) &&
                   resolve(handle, "curl_multi_add_handle", c.multi_add_handle, e) &&
                   resolve(handle, "curl_multi_remove_handle", c.multi_remove_handle, e) &&
                   resolve(handle, "curl_multi_socket_action", c.multi_socket_action, e) &&
                   resolve(handle, "curl_multi_info_read", c.multi_info_read, e) &&
                   resolve(handle, "curl_multi_strerror", c.multi_strerror, e) &&
                   resolve(handle, "curl_slist_append", c.slist_append, e) &&
                   resolve(handle, "curl_slist_free_all", c.slist_free_all, e);
  if (!all) return loaded;
  if (c.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    loaded.error = "curl_global_init failed";
    return loaded;
  }
  loaded.ok = true;
  return loaded;
}

}  // namespace

const CurlLibrary* curl_library(const char** error) {
  static const Loaded kLoaded = load();
  if (!kLoaded.ok) {
    if (error != nullptr) *error = kLoaded.error.c_str();
    return nullptr;
  }
  return &kLoaded.library;
}

}  // namespace passepartout
