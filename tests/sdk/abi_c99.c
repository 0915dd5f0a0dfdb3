/* abi.h compiled as strict C99: the header is plain C, and its layout rules
 * (version fields first, size macros covering every 1.0, 1.1, 1.2, 1.3 and 1.4 member) hold in C.
 * Each minor's size ends at its last member and the next minor's first member
 * starts there: members are appended, never inserted or reordered. */
#include "passepartout/abi.h"

#include <stddef.h>

/* C99 has no _Static_assert: an array of negative size fails the build instead. */
#define PP_C99_CHECK(name, condition) typedef char pp_c99_check_##name[(condition) ? 1 : -1]

PP_C99_CHECK(skill_size_first, offsetof(pp_skill_api, struct_size) == 0);
PP_C99_CHECK(skill_major_second, offsetof(pp_skill_api, abi_major) == 4);
PP_C99_CHECK(skill_minor_third, offsetof(pp_skill_api, abi_minor) == 6);
PP_C99_CHECK(host_size_first, offsetof(pp_host_api, struct_size) == 0);
PP_C99_CHECK(host_major_second, offsetof(pp_host_api, abi_major) == 4);
PP_C99_CHECK(host_minor_third, offsetof(pp_host_api, abi_minor) == 6);
/* ABI 1.0 ends with import_state; ABI 1.1 starts right after it with tools. */
PP_C99_CHECK(skill_size_1_0, PP_SKILL_API_SIZE_1_0 == offsetof(pp_skill_api, import_state) + sizeof(void*));
PP_C99_CHECK(skill_1_1_appended, PP_SKILL_API_SIZE_1_0 == offsetof(pp_skill_api, tools));
/* ABI 1.1 ends with error_policy; ABI 1.2 starts right after it with config_keys. */
PP_C99_CHECK(skill_size_1_1, PP_SKILL_API_SIZE_1_1 == offsetof(pp_skill_api, error_policy) + sizeof(void*));
PP_C99_CHECK(skill_1_2_appended, PP_SKILL_API_SIZE_1_1 == offsetof(pp_skill_api, config_keys));
/* ABI 1.2 ends with config_key_count; ABI 1.3 starts right after it with actuator_specs. */
PP_C99_CHECK(skill_size_1_2, PP_SKILL_API_SIZE_1_2 == offsetof(pp_skill_api, config_key_count) + sizeof(size_t));
PP_C99_CHECK(skill_1_3_appended, PP_SKILL_API_SIZE_1_2 == offsetof(pp_skill_api, actuator_specs));
/* ABI 1.3 ends with mandate; ABI 1.4 starts right after it with select_model. */
PP_C99_CHECK(skill_size_1_3, PP_SKILL_API_SIZE_1_3 == offsetof(pp_skill_api, mandate) + sizeof(void*));
PP_C99_CHECK(skill_1_4_appended, PP_SKILL_API_SIZE_1_3 == offsetof(pp_skill_api, select_model));
/* ABI 1.4 ends with select_model, the last member of the table. */
PP_C99_CHECK(skill_size_1_4, PP_SKILL_API_SIZE_1_4 == offsetof(pp_skill_api, select_model) + sizeof(void*));
PP_C99_CHECK(skill_size_1_4_whole, PP_SKILL_API_SIZE_1_4 == sizeof(pp_skill_api));
PP_C99_CHECK(sizes_grow,
             PP_SKILL_API_SIZE_1_0 < PP_SKILL_API_SIZE_1_1 && PP_SKILL_API_SIZE_1_1 < PP_SKILL_API_SIZE_1_2 &&
                 PP_SKILL_API_SIZE_1_2 < PP_SKILL_API_SIZE_1_3 && PP_SKILL_API_SIZE_1_3 < PP_SKILL_API_SIZE_1_4);
PP_C99_CHECK(minor_1_4, PP_ABI_MAJOR == 1 && PP_ABI_MINOR == 4);
PP_C99_CHECK(model_kinds,
             PP_MODEL_DEFAULT == 0 && PP_MODEL_USE == 1 && PP_MODEL_SKIP == 2 && PP_MODEL_LOCAL_ONLY == 1U);
PP_C99_CHECK(error_kinds, PP_ERROR_DEFAULT == 0 && PP_ERROR_SKIP == 1 && PP_ERROR_FALLBACK == 2 && PP_ERROR_ABORT == 3);
PP_C99_CHECK(host_size_1_0, PP_HOST_API_SIZE_1_0 == sizeof(pp_host_api));
PP_C99_CHECK(verdict_kinds, PP_VERDICT_PASS == 0 && PP_VERDICT_APPROVAL == 3);
PP_C99_CHECK(kinds, PP_KIND_NIL == 0 && PP_KIND_LIST == 7);
PP_C99_CHECK(status, PP_OK == 0 && PP_ERROR != PP_OK);

/* Every member is callable from C with C types. */
int pp_c99_reads_keyword(const pp_host_api* host, const pp_value* plist, const char* key, size_t key_len);
int pp_c99_reads_keyword(const pp_host_api* host, const pp_value* plist, const char* key, size_t key_len) {
  const pp_value* value = host->get(plist, key, key_len);
  size_t len = 0;
  const char* text = host->text(value, &len);
  return host->kind(value) == PP_KIND_KEYWORD && text != NULL && len > 0;
}

const pp_value* pp_c99_builds_plist(const pp_host_api* host, pp_call* call);
const pp_value* pp_c99_builds_plist(const pp_host_api* host, pp_call* call) {
  const pp_value* items[2];
  items[0] = host->make_keyword(call, "TOOL", 4);
  items[1] = host->make_string(call, "shell", 5);
  if (items[0] == NULL || items[1] == NULL) return NULL;
  return host->make_list(call, items, 2);
}

/* The ABI 1.1 members are callable from C too: a tool table, an actuator, a policy. */
pp_status pp_c99_calls_tool(const pp_skill_api* api, void* instance, pp_call* call, const pp_value* args);
pp_status pp_c99_calls_tool(const pp_skill_api* api, void* instance, pp_call* call, const pp_value* args) {
  const pp_value* result = NULL;
  pp_error_choice choice = {PP_ERROR_DEFAULT, NULL};
  pp_status status;
  if (api->struct_size < PP_SKILL_API_SIZE_1_1 || api->abi_minor < 1 || api->tool_count == 0) return PP_ERROR;
  if (api->tools[0].name == NULL || api->call_tool == NULL) return PP_ERROR;
  status = api->call_tool(instance, call, 0, args, NULL, &result);
  if (status == PP_OK && api->actuator_count > 0 && api->actuators[0] != NULL && api->act != NULL) {
    status = api->act(instance, call, 0, args, NULL, &result);
  }
  if (status == PP_OK && api->observe != NULL) status = api->observe(instance, call, args);
  if (status == PP_OK && api->error_policy != NULL) status = api->error_policy(instance, call, args, args, &choice);
  return status;
}

/* The ABI 1.2 config keys are readable from C: the first key's name, if any. */
const char* pp_c99_first_config_key(const pp_skill_api* api);
const char* pp_c99_first_config_key(const pp_skill_api* api) {
  if (api->struct_size < PP_SKILL_API_SIZE_1_2 || api->abi_minor < 2) return NULL;
  if (api->config_keys == NULL || api->config_key_count == 0) return NULL;
  return api->config_keys[0].name;
}

/* The ABI 1.4 router is callable from C; PP_ERROR for a kind the host does not know. */
pp_status pp_c99_routes(const pp_skill_api* api, void* instance, pp_call* call, const pp_value* provider,
                        const pp_value* request);
pp_status pp_c99_routes(const pp_skill_api* api, void* instance, pp_call* call, const pp_value* provider,
                        const pp_value* request) {
  pp_model_choice choice = {PP_MODEL_DEFAULT, 0U, NULL, NULL};
  if (api->struct_size < PP_SKILL_API_SIZE_1_4 || api->abi_minor < 4 || api->select_model == NULL) return PP_OK;
  if (api->select_model(instance, call, provider, request, &choice) != PP_OK) return PP_ERROR;
  return choice.kind <= PP_MODEL_SKIP && (choice.flags & ~PP_MODEL_LOCAL_ONLY) == 0U ? PP_OK : PP_ERROR;
}
