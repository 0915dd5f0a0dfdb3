// libcurl, loaded when the first HTTP client is made rather than when the
// process starts: linked directly, libcurl brings OpenSSL, GnuTLS, Kerberos,
// LDAP and libssh2 into every daemon, 4.5 MB resident and 4 ms of start-up
// (measured), while a daemon without a real provider never makes a request.
// Included only by http_client.cpp (it brings in <curl/curl.h>).
#pragma once

#include <curl/curl.h>

namespace passepartout {

// The libcurl functions the transport calls, resolved from libcurl.so.4.
struct CurlLibrary {
  decltype(&curl_global_init) global_init;
  decltype(&curl_easy_init) easy_init;
  decltype(&curl_easy_cleanup) easy_cleanup;
  decltype(&curl_easy_setopt) easy_setopt;
  decltype(&curl_easy_getinfo) easy_getinfo;
  decltype(&curl_easy_strerror) easy_strerror;
  decltype(&curl_multi_init) multi_init;
  decltype(&curl_multi_cleanup) multi_cleanup;
  decltype(&curl_multi_setopt) multi_setopt;
  decltype(&curl_multi_add_handle) multi_add_handle;
  decltype(&curl_multi_remove_handle) multi_remove_handle;
  decltype(&curl_multi_socket_action) multi_socket_action;
  decltype(&curl_multi_info_read) multi_info_read;
  decltype(&curl_multi_strerror) multi_strerror;
  decltype(&curl_slist_append) slist_append;
  decltype(&curl_slist_free_all) slist_free_all;
};

// The library, loaded and initialised (curl_global_init) on the first call,
// thread-safe; null when it cannot be, and then `error` says why (once
// loaded, the same library serves every later call).
const CurlLibrary* curl_library(const char** error);

}  // namespace passepartout
