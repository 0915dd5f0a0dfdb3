/* plain-c-skill: a complete skill written in plain C99 against abi.h alone, proving
 * the ABI needs no C++: it reads the action and config through the host table,
 * builds its reason and prompt there, and hands its counter over on hot swap. */
#include "passepartout/abi.h"

#include <stdlib.h>
#include <string.h>

typedef struct c_skill {
  const pp_host_api* host;
  pp_self* self;
  const char* forbidden; /* the config's :FORBIDDEN text, valid until destroy */
  size_t forbidden_len;
  int64_t imported;
} c_skill;

static int text_equals(const pp_host_api* host, const pp_value* v, const char* expected, size_t len) {
  size_t actual_len = 0;
  const char* actual = host->text(v, &actual_len);
  return actual_len == len && memcmp(actual, expected, len) == 0;
}

static void* create(const pp_host_api* host, pp_self* self, const pp_value* config, pp_call* call) {
  static const char message[] = "plain-c-skill created";
  static const char no_memory[] = "out of memory";
  c_skill* skill = (c_skill*)malloc(sizeof *skill);
  if (skill == NULL) {
    host->set_error(call, no_memory, sizeof no_memory - 1);
    return NULL;
  }
  skill->host = host;
  skill->self = self;
  skill->forbidden = host->text(host->get(config, "FORBIDDEN", 9), &skill->forbidden_len);
  skill->imported = 0;
  host->log(self, PP_LOG_INFO, message, sizeof message - 1);
  return skill;
}

static void destroy(void* instance) { free(instance); }

static pp_status gate(void* instance, pp_call* call, const pp_value* action, const pp_value* signal,
                      pp_verdict* verdict) {
  static const char reason[] = "plain-c-skill forbids this tool";
  const c_skill* skill = (const c_skill*)instance;
  const pp_host_api* host = skill->host;
  (void)signal;
  if (skill->forbidden_len > 0 &&
      text_equals(host, host->get(action, ":tool", 5), skill->forbidden, skill->forbidden_len)) {
    verdict->kind = PP_VERDICT_BLOCK;
    verdict->level = PP_LOG_WARN;
    verdict->reason = host->make_string(call, reason, sizeof reason - 1);
  }
  return PP_OK;
}

static pp_status trigger(void* instance, pp_call* call, const pp_value* signal, int32_t* triggered) {
  const c_skill* skill = (const c_skill*)instance;
  (void)call;
  *triggered = skill->host->kind(skill->host->get(signal, "PAYLOAD", 7)) == PP_KIND_LIST;
  return PP_OK;
}

static pp_status prompt(void* instance, pp_call* call, const pp_value* signal, const pp_value** out) {
  static const char text[] = "prompt from plain-c-skill";
  const c_skill* skill = (const c_skill*)instance;
  (void)signal;
  *out = skill->host->make_string(call, text, sizeof text - 1);
  return *out != NULL ? PP_OK : PP_ERROR;
}

static pp_status export_state(void* instance, pp_call* call, const pp_value** state) {
  const c_skill* skill = (const c_skill*)instance;
  *state = skill->host->make_integer(call, skill->imported + 1);
  return PP_OK;
}

static pp_status import_state(void* instance, pp_call* call, const pp_value* state) {
  static const char error[] = "plain-c-skill expects an integer state";
  c_skill* skill = (c_skill*)instance;
  if (skill->host->kind(state) != PP_KIND_INTEGER) {
    skill->host->set_error(call, error, sizeof error - 1);
    return PP_ERROR;
  }
  skill->imported = skill->host->integer(state);
  return PP_OK;
}

PP_EXPORT const pp_skill_api* passepartout_skill_entry(void) {
  /* Designated initializers: members a later minor appends stay zero (absent). */
  static const pp_skill_api table = {
      .struct_size = sizeof(pp_skill_api),
      .abi_major = PP_ABI_MAJOR,
      .abi_minor = PP_ABI_MINOR,
      .name = "plain-c-skill",
      .version = "1.0.0",
      .create = create,
      .destroy = destroy,
      .trigger = trigger,
      .prompt = prompt,
      .gate = gate,
      .export_state = export_state,
      .import_state = import_state,
  };
  return &table;
}
