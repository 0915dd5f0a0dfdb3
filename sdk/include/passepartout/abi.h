/* passepartout/abi.h: the C boundary between the Passepartout host and a skill.
 * Pure C99; nothing of either side's C++ runtime crosses it.
 *
 * A skill is a shared object that exports exactly one function,
 * `passepartout_skill_entry`, returning a pointer to its `pp_skill_api` table.
 * The host hands the skill a `pp_host_api` table at create; every value the
 * skill reads or builds goes through it, as an opaque `pp_value` handle.
 *
 * Versioning. Both tables begin with `struct_size`, `abi_major`, `abi_minor`.
 * The host loads a skill only when the majors are equal and the host's minor is
 * at least the skill's. Members are only ever appended: a member added in minor
 * N is read only when `struct_size` covers it, so newer hosts read older skills
 * and skills can probe a newer host's table the same way. ABI 1.1 appended
 * tools, actuators, `observe` and `error_policy` to `pp_skill_api`; a 1.0
 * skill still loads and simply offers none of them. ABI 1.2 appended the
 * config keys a skill reads; an older skill declares none, and the host then
 * accepts any key in its manifest's `config:`. ABI 1.3 appended what each
 * actuator takes (so the model is offered it as a function of its own) and
 * the `mandate` hook; an older skill's actuators are offered by name only.
 * ABI 1.4 appended the `select_model` hook (the model router); an older
 * skill simply routes nothing.
 *
 * Ownership. Whoever allocates frees. Pointers passed *into* a hook are
 * borrowed for the duration of that call unless a member says otherwise. Values
 * a hook returns are built through the host's `make_*` functions in the call's
 * `pp_call` context and owned by the host.
 *
 * Threads. `create`, `destroy`, `self_test`, `export_state` and `import_state`
 * are called on the host's control thread, never concurrently with each other
 * for one instance. `trigger`, `prompt`, `gate`, `observe`, `error_policy`,
 * `mandate` and `select_model` may be called from any pipeline thread (the
 * router also from a network thread), concurrently, for the same instance:
 * they must not mutate shared instance state without synchronisation.
 * `call_tool` and `act` (ABI 1.1) run on the host's blocking-work threads,
 * concurrently with each other and with the pipeline hooks; they may block
 * (run a process, touch files) for a bounded time. Skills must not start threads,
 * timers or use `thread_local` objects with destructors: the host unloads the
 * library when it is swapped out, and anything still running or registered
 * would then jump into unmapped code.
 *
 * Errors. Hooks return `PP_OK` or `PP_ERROR`; on error they may describe the
 * failure with `host->set_error`. A gate that returns `PP_ERROR`, or a verdict
 * kind the host does not know, blocks the action (fail closed). A tool or
 * actuator that returns `PP_ERROR` fails with that text as its error, which
 * the model sees; a failing `observe` or `error_policy` is logged and ignored.
 */
#ifndef PASSEPARTOUT_ABI_H
#define PASSEPARTOUT_ABI_H

/* A C header: typedef, <stdint.h>, (void) and the ABI's own names are C's.
 * NOLINTBEGIN(modernize-use-using, modernize-deprecated-headers, modernize-redundant-void-arg,
 *             readability-identifier-naming) */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** ABI version this header describes. */
#define PP_ABI_MAJOR 1
#define PP_ABI_MINOR 4

/** Name of the one symbol a skill exports. */
#define PP_ENTRY_SYMBOL "passepartout_skill_entry"

/** Marks the entry function exported from a library built with hidden visibility. */
#if defined(__GNUC__) || defined(__clang__)
#define PP_EXPORT __attribute__((visibility("default")))
#else
#define PP_EXPORT
#endif

/** Status returned by every hook. Any value other than PP_OK is an error. */
typedef int32_t pp_status;
#define PP_OK 0
#define PP_ERROR 1

/** Kinds of value, as returned by `pp_host_api.kind`. Unknown kinds read as PP_KIND_NIL. */
typedef int32_t pp_kind;
#define PP_KIND_NIL 0     /**< NIL: false and the empty list */
#define PP_KIND_T 1       /**< T: true */
#define PP_KIND_INTEGER 2 /**< signed 64-bit integer */
#define PP_KIND_FLOAT 3   /**< IEEE double */
#define PP_KIND_STRING 4  /**< UTF-8 text */
#define PP_KIND_KEYWORD 5 /**< :NAME, compared ignoring ASCII case, name stored upper-case */
#define PP_KIND_SYMBOL 6  /**< bare symbol */
#define PP_KIND_LIST 7    /**< non-empty list */

/** Log levels for `pp_host_api.log`. Unknown levels are logged as PP_LOG_INFO. */
typedef int32_t pp_log_level;
#define PP_LOG_DEBUG 0
#define PP_LOG_INFO 1
#define PP_LOG_WARN 2
#define PP_LOG_ERROR 3

/** Verdict kinds a gate returns. Any other value blocks the action and is traced as failed. */
typedef uint32_t pp_verdict_kind;
#define PP_VERDICT_PASS 0     /**< let the action through unchanged */
#define PP_VERDICT_REWRITE 1  /**< replace the action with `pp_verdict.action` */
#define PP_VERDICT_BLOCK 2    /**< stop: the action must not run; `reason` says why */
#define PP_VERDICT_APPROVAL 3 /**< a human must approve; later gates still run */

/** An immutable value owned by the host (a signal, an action, config, or something built). */
typedef struct pp_value pp_value;

/** The context of one hook invocation. Values built through it are owned by the
 *  host and live until the hook returns; the host takes what it needs from
 *  them (a verdict's action and reason, a prompt, exported state). Never store
 *  a pp_call or a value built through it beyond the call. */
typedef struct pp_call pp_call;

/** The host's handle for one skill instance, given at create. Valid until destroy returns. */
typedef struct pp_self pp_self;

/** What a gate decided. The host zero-fills it (PASS, no action, no reason) before each call. */
typedef struct pp_verdict {
  /** One of PP_VERDICT_*. */
  pp_verdict_kind kind;
  /** For BLOCK: PP_LOG_WARN or PP_LOG_ERROR (the level of the rejection the user sees);
   *  0 means PP_LOG_ERROR. Ignored otherwise. */
  pp_log_level level;
  /** REWRITE: the new action (required; a rewrite without one fails closed).
   *  APPROVAL: the action to approve (optional; defaults to the current action).
   *  Built through the host in this call's pp_call. */
  const pp_value* action;
  /** BLOCK and APPROVAL: a string value saying why, shown to the user and the
   *  operator (optional). Built through the host in this call's pp_call. */
  const pp_value* reason;
} pp_verdict;

/** A tool the skill offers the model (ABI 1.1). Every string is NUL-terminated
 *  UTF-8 with static storage duration (the host reads them at load and keeps
 *  copies). The host refuses a library whose tools break these rules. */
typedef struct pp_tool {
  /** Required: 1 to 64 characters of lower-case letters, digits, '-' and '_',
   *  unique within the skill ("read-file"). The model calls the tool by it. */
  const char* name;
  /** What the tool does, one line, shown to the model (NULL: none). */
  const char* description;
  /** The arguments as JSON text in a JSON-schema-like shape, a JSON object
   *  such as `{"type":"object","properties":{"filepath":{"type":"string"}},
   *  "required":["filepath"]}` (NULL: the tool takes no arguments). The host
   *  parses it at load: text that is not a JSON object refuses the load. */
  const char* parameters;
} pp_tool;

/** A key the skill reads from its manifest's `config:` (ABI 1.2). Every
 *  string is NUL-terminated UTF-8 with static storage duration (the host
 *  reads them at load and keeps copies). */
typedef struct pp_config_key {
  /** Required: the key as the manifest writes it ("max_output"), 1 to 64
   *  letters, digits, '-' and '_', unique within the skill ignoring ASCII case. */
  const char* name;
  /** The value's kind, for people: "string", "integer", "number", "boolean",
   *  "list" or "map" (NULL: any). */
  const char* type;
  /** What the skill uses when the key is absent, as text (NULL: nothing). */
  const char* default_value;
  /** What the key does, one line (NULL: none). */
  const char* description;
} pp_config_key;

/** What an actuator takes (ABI 1.3), as the model is told of it: the host
 *  offers an actuator with a payload schema as a function of the model's own
 *  tool-calling format, named as the actuator in lower case, and writes it in
 *  the action grammar of the system prompt. Every string is NUL-terminated
 *  UTF-8 with static storage duration (the host reads them at load and keeps
 *  copies). The host refuses a library whose specs break these rules. */
typedef struct pp_actuator_spec {
  /** What the actuator does, one line, shown to the model (NULL: none). */
  const char* description;
  /** The action's `:PAYLOAD` as a JSON Schema object whose properties are the
   *  payload's keys in lower case, e.g. `{"type":"object","properties":
   *  {"cmd":{"type":"string"},"explanation":{"type":"string"}},"required":
   *  ["cmd","explanation"]}`; a call's arguments become the payload with each
   *  key upper-cased (`:CMD`). NULL: the payload is not described, and the
   *  actuator is named in the grammar only, never offered as a function. */
  const char* payload;
} pp_actuator_spec;

/** What an error policy chose for a failed signal (ABI 1.1). Any other value
 *  reads as PP_ERROR_DEFAULT. */
typedef uint32_t pp_error_kind;
#define PP_ERROR_DEFAULT 0  /**< no opinion: the host's error tiers apply */
#define PP_ERROR_SKIP 1     /**< drop the signal and go on with the next one */
#define PP_ERROR_FALLBACK 2 /**< continue with an error signal carrying `text` */
#define PP_ERROR_ABORT 3    /**< stop processing this signal's chain at once */

/** An error policy's answer. The host zero-fills it (PP_ERROR_DEFAULT, no
 *  text) before each call. */
typedef struct pp_error_choice {
  /** One of PP_ERROR_*. */
  uint32_t kind;
  /** PP_ERROR_FALLBACK: the text to continue with, a string value built
   *  through the host in this call's pp_call (required: a fallback without a
   *  string reads as PP_ERROR_DEFAULT). Ignored otherwise. */
  const pp_value* text;
} pp_error_choice;

/** What a model router chose for one provider of a model call (ABI 1.4). Any
 *  other value fails the choice, which counts as that provider's failure. */
typedef uint32_t pp_model_kind;
#define PP_MODEL_DEFAULT 0 /**< call the provider with its default model */
#define PP_MODEL_USE 1     /**< call it with the model named by `model` */
#define PP_MODEL_SKIP 2    /**< do not call it; `reason` says why (shown in the trace) */

/** Flags of a pp_model_choice. */
#define PP_MODEL_LOCAL_ONLY                                      \
  1U /**< the session reached private data: from now on the host \
          sends its calls to local providers only (sticky) */

/** A model router's answer. The host zero-fills it (PP_MODEL_DEFAULT, no
 *  flags) before each call. */
typedef struct pp_model_choice {
  /** One of PP_MODEL_*. */
  pp_model_kind kind;
  /** PP_MODEL_LOCAL_ONLY or 0. */
  uint32_t flags;
  /** PP_MODEL_USE: the model's name, a non-empty string value built through the
   *  host in this call's pp_call (required). Ignored otherwise. */
  const pp_value* model;
  /** PP_MODEL_SKIP and PP_MODEL_LOCAL_ONLY: why, a string value built through
   *  the host in this call's pp_call (optional). */
  const pp_value* reason;
} pp_model_choice;

/** Callbacks the host implements. Every member is required and non-NULL in a
 *  table the host hands out. All members may be called from any thread. The
 *  table stays valid until the skill's `destroy` returns. */
typedef struct pp_host_api {
  /** sizeof(pp_host_api) as the host was built: members beyond it are absent. */
  uint32_t struct_size;
  /** Host ABI version. */
  uint16_t abi_major;
  uint16_t abi_minor;

  /* --- diagnostics -------------------------------------------------------- */

  /** Logs `len` bytes of UTF-8 `message` for skill `self` at `level`.
   *  `message` is borrowed for the call. */
  void (*log)(pp_self* self, pp_log_level level, const char* message, size_t len);
  /** Describes why the current hook is failing (shown in traces and errors).
   *  Copies `len` bytes of `message`; the last call wins. */
  void (*set_error)(pp_call* call, const char* message, size_t len);

  /* --- reading values (never fail; a NULL `v` reads as NIL) ---------------- */

  /** The kind of `v`. */
  pp_kind (*kind)(const pp_value* v);
  /** The integer in `v`; 0 if `v` is not an integer. */
  int64_t (*integer)(const pp_value* v);
  /** The number in `v` as a double (integers convert); 0.0 otherwise. */
  double (*real)(const pp_value* v);
  /** The bytes of a string, or the name of a keyword (upper-case, no ':') or
   *  symbol; stores the length in `*len` (which may be NULL). Returns "" with
   *  length 0 for other kinds. Not NUL-terminated in general. Valid as long as `v`. */
  const char* (*text)(const pp_value* v, size_t* len);
  /** Number of elements of a list; 0 for NIL and non-lists. */
  size_t (*length)(const pp_value* v);
  /** Element `index` of a list, or NULL when out of range. Valid as long as `list`. */
  const pp_value* (*at)(const pp_value* list, size_t index);
  /** In a property list, the value after the first keyword equal to the
   *  `len`-byte `key` ignoring ASCII case (a leading ':' is optional), or NULL
   *  when absent. Valid as long as `plist`. */
  const pp_value* (*get)(const pp_value* plist, const char* key, size_t len);

  /* --- building values (owned by `call`; NULL only when the input is invalid) --- */

  /** NIL, and T. */
  const pp_value* (*make_nil)(pp_call* call);
  const pp_value* (*make_t)(pp_call* call);
  const pp_value* (*make_integer)(pp_call* call, int64_t value);
  const pp_value* (*make_float)(pp_call* call, double value);
  /** A string from `len` bytes; NULL (with an error set) if they are not valid UTF-8. */
  const pp_value* (*make_string)(pp_call* call, const char* bytes, size_t len);
  /** A keyword; the leading ':' is optional. NULL if empty or not valid UTF-8. */
  const pp_value* (*make_keyword)(pp_call* call, const char* name, size_t len);
  /** A symbol. NULL if empty or not valid UTF-8. */
  const pp_value* (*make_symbol)(pp_call* call, const char* name, size_t len);
  /** A list of `count` values (NIL when count is 0). The items are shared, not copied.
   *  NULL if any item is NULL. */
  const pp_value* (*make_list)(pp_call* call, const pp_value* const* items, size_t count);
  /** A copy of `plist` with `key` set to `value` (replaced where present,
   *  appended otherwise). NULL if `plist` is not NIL or a list, or `value` is NULL. */
  const pp_value* (*plist_put)(pp_call* call, const pp_value* plist, const char* key, size_t len,
                               const pp_value* value);
  /** `v` printed as an s-expression, as a string value (what a Lisp peer reads). */
  const pp_value* (*print)(pp_call* call, const pp_value* v);
} pp_host_api;

/** Hooks the skill implements. `create` and `destroy` are required; every other
 *  hook is optional (NULL when absent). A skill without `gate` is never
 *  consulted as a gate; one without `prompt` is never selected to shape a prompt. */
typedef struct pp_skill_api {
  /** sizeof(pp_skill_api) as the skill was built. Must cover every member of
   *  the skill's declared ABI version. */
  uint32_t struct_size;
  /** The ABI the skill was built against: PP_ABI_MAJOR and PP_ABI_MINOR. */
  uint16_t abi_major;
  uint16_t abi_minor;
  /** The skill's name and version, NUL-terminated, static. They must equal the
   *  manifest's `name` and `version`, or the host refuses the library. */
  const char* name;
  const char* version;

  /** Creates an instance. Called once per load on the control thread.
   *  `host`: the host table, valid until `destroy` returns.
   *  `self`: the handle to pass to `host->log`, valid until `destroy` returns.
   *  `config`: the manifest's `config` (a property list or NIL), valid until
   *  `destroy` returns.
   *  Returns the instance, or NULL on failure (with `host->set_error(call, ...)`). */
  void* (*create)(const pp_host_api* host, pp_self* self, const pp_value* config, pp_call* call);
  /** Destroys an instance `create` returned. Control thread. Must not fail. */
  void (*destroy)(void* instance);

  /** Whether this skill wants to shape the prompt for `signal`. Consulted when
   *  the manifest's declarative `trigger` matched, or when the manifest
   *  declares none (the hook alone decides then). Any thread.
   *  Writes 1 or 0 to `*triggered`; an error counts as not triggered. */
  pp_status (*trigger)(void* instance, pp_call* call, const pp_value* signal, int32_t* triggered);
  /** The prompt text for `signal`: stores a string value in `*prompt` (or NULL
   *  to fall back to the user's text). Any thread. */
  pp_status (*prompt)(void* instance, pp_call* call, const pp_value* signal, const pp_value** prompt);
  /** Judges `action` (proposed in response to `signal`) and fills `*verdict`.
   *  Any thread, concurrently. Returning PP_ERROR blocks the action. */
  pp_status (*gate)(void* instance, pp_call* call, const pp_value* action, const pp_value* signal, pp_verdict* verdict);
  /** Checks the instance works before it is published (hot swap, load).
   *  Control thread. PP_ERROR refuses the load. */
  pp_status (*self_test)(void* instance, pp_call* call);
  /** Hands state to the next version during a hot swap: stores a value in
   *  `*state`. Control thread. */
  pp_status (*export_state)(void* instance, pp_call* call, const pp_value** state);
  /** Receives the state the previous version exported (borrowed for the call).
   *  Not called when the previous version has no `export_state`. Control
   *  thread. PP_ERROR refuses the swap. */
  pp_status (*import_state)(void* instance, pp_call* call, const pp_value* state);

  /* --- ABI 1.1: read only when abi_minor >= 1 and struct_size covers them ---- */

  /** The tools the skill offers the model: `tool_count` entries with static
   *  storage duration (NULL and 0: none). Read once, at load. At most 1024. */
  const pp_tool* tools;
  size_t tool_count;
  /** Runs tool number `tool` (an index into `tools`) with `args`, the
   *  arguments the model gave (a property list, or NIL), for the action
   *  proposed in response to `signal`. Stores the result in `*result` (any
   *  value built in `call`, or one of the borrowed inputs; NULL reads as NIL).
   *  Called on one of the host's blocking-work threads, concurrently for the
   *  same instance, after every gate let the call through; it may block for
   *  the bounded time the tool needs. `args` and `signal` are borrowed for the
   *  call. PP_ERROR reports the tool's failure to the model with the text
   *  given to `host->set_error`. Required when `tool_count` > 0. */
  pp_status (*call_tool)(void* instance, pp_call* call, size_t tool, const pp_value* args, const pp_value* signal,
                         const pp_value** result);
  /** The actuator targets the skill serves, e.g. "shell" (an action with
   *  `:TARGET :SHELL` reaches it): `actuator_count` NUL-terminated names of
   *  1 to 64 letters, digits, '-' and '_', compared ignoring ASCII case,
   *  with static storage duration (NULL and 0: none). At most 64. */
  const char* const* actuators;
  size_t actuator_count;
  /** Carries out `action` (an approved action whose `:TARGET` names actuator
   *  number `actuator`, an index into `actuators`), proposed in response to
   *  `signal`. Stores what happened in `*result` (a value built in `call`, or
   *  a borrowed input; NULL reads as NIL, meaning nothing to report). Called on
   *  one of the host's blocking-work threads, concurrently for the same
   *  instance, only after every gate and the last-mile check passed; it may
   *  block for its bounded time. `action` and `signal` are borrowed for the
   *  call. PP_ERROR reports the failure, with the text given to
   *  `host->set_error`. Required when `actuator_count` > 0. */
  pp_status (*act)(void* instance, pp_call* call, size_t actuator, const pp_value* action, const pp_value* signal,
                   const pp_value** result);
  /** Receives every signal the manifest's `trigger` matches, as it is
   *  perceived and before it is reasoned about: user input as well as
   *  heartbeats, so a skill can do background work on it. Called only when the
   *  manifest declares a trigger. Any
   *  pipeline thread, concurrently; keep it short (it may not block on I/O for
   *  long). `signal` is borrowed for the call. PP_ERROR is logged; nothing
   *  else happens. Optional. */
  pp_status (*observe)(void* instance, pp_call* call, const pp_value* signal);
  /** Chooses what happens to `signal` after processing it failed with
   *  `error` (a property list with at least `:MESSAGE`, the error text), as the
   *  seed's restarts did: skip the signal, continue with a fallback text, or
   *  abort. Writes `*choice` (zero-filled: PP_ERROR_DEFAULT). Any pipeline
   *  thread, concurrently. `signal` and `error` are borrowed for the call.
   *  PP_ERROR, or a kind the host does not know, counts as PP_ERROR_DEFAULT.
   *  Optional. */
  pp_status (*error_policy)(void* instance, pp_call* call, const pp_value* signal, const pp_value* error,
                            pp_error_choice* choice);

  /* --- ABI 1.2: read only when abi_minor >= 2 and struct_size covers them ---- */

  /** The keys the skill reads from its manifest's `config:`: `config_key_count`
   *  entries with static storage duration. Read once, at load: the host
   *  refuses a manifest whose `config:` holds a key not listed, naming the
   *  nearest listed one. A count of 0: the skill does not say, and the host
   *  accepts any key; a count with NULL refuses the library. At most 256. */
  const pp_config_key* config_keys;
  size_t config_key_count;

  /* --- ABI 1.3: read only when abi_minor >= 3 and struct_size covers them ---- */

  /** What each actuator takes: NULL (none is described), or `actuator_count`
   *  entries parallel to `actuators`, with static storage duration. Read once,
   *  at load. */
  const pp_actuator_spec* actuator_specs;
  /** A standing mandate (seed D8) for `signal`: one line of text the system
   *  prompt carries while this skill is loaded ("Every action carries an
   *  explanation."), or none. Stores a string value in `*line`, or NULL for
   *  none. Any pipeline thread, concurrently, once per model call; it is
   *  bounded by the gate budget: a mandate that fails, answers something
   *  other than a string, or is late is left out, and logged with the
   *  skill's name. `signal` is borrowed for the call. Optional. */
  pp_status (*mandate)(void* instance, pp_call* call, const pp_value* signal, const pp_value** line);

  /* --- ABI 1.4: read only when abi_minor >= 4 and struct_size covers them ---- */

  /** The model router (seed D3): chooses the model of one provider for one
   *  model call, or skips the provider. The host asks the loaded skill of
   *  highest priority that has this hook, once per provider the cascade
   *  tries, in cascade order. `provider` is a property list
   *  `(:NAME "openai" :LOCAL NIL :MODEL "gpt-4o-mini")` (:LOCAL T for a
   *  provider the operator marked `local: true`; :MODEL its default model);
   *  `request` is `(:SIGNAL <signal> :SESSION "id" :SENSOR :USER-INPUT
   *  :PROMPT "<the current turn>" :SYSTEM "<the system prompt>"
   *  :PROMPT-TOKENS <estimate> :TOOLS <number offered> :MODEL "<asked>")`,
   *  :MODEL present only when the client asked for one (`:META :MODEL`).
   *  Writes `*choice` (zero-filled: the provider's default). Any pipeline or
   *  network thread, concurrently; bounded by the gate budget. PP_ERROR, a
   *  kind the host does not know, USE without a model, or an answer after the
   *  budget counts as that provider's failure (the cascade goes on to the
   *  next one, the log names the skill). Both are borrowed for the call.
   *  Optional. */
  pp_status (*select_model)(void* instance, pp_call* call, const pp_value* provider, const pp_value* request,
                            pp_model_choice* choice);
} pp_skill_api;

/** The entry function's type. It takes no arguments, may be called more than
 *  once, and returns a pointer to a table with static storage duration. */
typedef const pp_skill_api* (*pp_skill_entry_fn)(void);

/** Converts a size to uint32_t; a C++ cast in C++ so consumers built with
 *  -Wold-style-cast can use the size macros below. */
#ifdef __cplusplus
#define PP_SIZE_U32(size) static_cast<uint32_t>(size)
#else
#define PP_SIZE_U32(size) ((uint32_t)(size))
#endif

/** Size of pp_skill_api for ABI 1.0: a table must be at least this large. */
#define PP_SKILL_API_SIZE_1_0 PP_SIZE_U32(offsetof(pp_skill_api, import_state) + sizeof(void*))
/** Size of pp_skill_api for ABI 1.1: a table declaring minor 1 must be at least this large. */
#define PP_SKILL_API_SIZE_1_1 PP_SIZE_U32(offsetof(pp_skill_api, error_policy) + sizeof(void*))
/** Size of pp_skill_api for ABI 1.2: a table declaring minor 2 must be at least this large. */
#define PP_SKILL_API_SIZE_1_2 PP_SIZE_U32(offsetof(pp_skill_api, config_key_count) + sizeof(size_t))
/** Size of pp_skill_api for ABI 1.3: a table declaring minor 3 must be at least this large. */
#define PP_SKILL_API_SIZE_1_3 PP_SIZE_U32(offsetof(pp_skill_api, mandate) + sizeof(void*))
/** Size of pp_skill_api for ABI 1.4: a table declaring minor 4 must be at least this large. */
#define PP_SKILL_API_SIZE_1_4 PP_SIZE_U32(offsetof(pp_skill_api, select_model) + sizeof(void*))
/** Size of pp_host_api for ABI 1.0. */
#define PP_HOST_API_SIZE_1_0 PP_SIZE_U32(offsetof(pp_host_api, print) + sizeof(void*))

#ifdef __cplusplus
}
#endif

/* NOLINTEND(modernize-use-using, modernize-deprecated-headers, modernize-redundant-void-arg,
 *           readability-identifier-naming) */

#endif /* PASSEPARTOUT_ABI_H */
