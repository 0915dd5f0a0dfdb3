// The messages of the wire protocol: builders for what the daemon sends
// (handshake, health response, stream chunks, responses) and classifiers for what it receives.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "daemon/frame_codec.hpp"
#include "value/value.hpp"

namespace passepartout {

// Keys are matched ignoring case on input (Value::get) and always emitted upper case.
//
// Shapes the daemon sends:
//   (:TYPE :EVENT :PAYLOAD (:ACTION :HANDSHAKE :VERSION "<version>" :CAPABILITIES (:AUTH ...)))
//       first frame on every accepted connection; the server speaks first
//   (:TYPE :HEALTH-RESPONSE :STATUS <health keyword> :CHECKED-P <T|NIL>)
//       the answer to (:TYPE :HEALTH-CHECK)
//   (:TYPE :STREAM-CHUNK :PAYLOAD (:TEXT "<delta>"))
//       a piece of a reply still being produced, before its final frame
//   (:TYPE :RESPONSE :STATUS :OK :PAYLOAD (:MESSAGE "<text>" <more keys>...))
//   (:TYPE :RESPONSE :STATUS :ERROR :PAYLOAD (:MESSAGE "<text>" :CODE :<CODE>))
//       operator responses and every error the daemon reports, including a
//       malformed frame (:CODE :BAD-FRAME or :FRAME-TOO-LARGE) just before it
//       closes the connection. Clients read :PAYLOAD :MESSAGE.
// A request over TCP may carry :AUTH "<token>" at its top level; the server
// checks and removes it before anyone else sees the message.
//
// Shapes the daemon receives (besides the health check):
//
//   User input (seed A3), from Lisp clients and `passepartout chat`:
//     (:TYPE :EVENT :META (:SOURCE :TUI [:SESSION-ID "s"]) :PAYLOAD (:SENSOR :USER-INPUT :TEXT "..."))
//   It is injected into the pipeline; whatever the :TUI actuator sends
//   (the approved action with its :GATE-TRACE, seed A16), approval notices
//   and :STREAM-CHUNK frames go back on the same connection as they happen.
//   Without :SESSION-ID the session is the connection ("conn-<id>").
//   An action that needs approval while its session or the daemon already
//   has as many pending as --max-pending-approvals-per-session or
//   --max-pending-approvals allow does not run and is not held; the source
//   gets (:TYPE :LOG :PAYLOAD (:LEVEL :ERROR :TEXT "Action not run: approval
//   refused: ...")) saying which bound and what to do.
//   A client that needs to know when the exchange is over adds a top-level
//   :REQUEST-ID "<id>"; the daemon then ends it with
//     (:TYPE :RESPONSE :STATUS :OK :REQUEST-ID "<id>"
//      :PAYLOAD (:MESSAGE "done" :STOPPED-BY :DONE|:DEPTH|:INTERRUPT|:ERROR|:SKIP|:ABORT :CYCLES n))
//   Lisp clients never send it and see exactly the seed's frames.
//   Any other message that is not an operator request is injected as a
//   signal too (its :TYPE decides, seed C1), with the same reply rules.
//
//   Operator requests (need authentication: see ConnectionInfo):
//     (:TYPE :OPERATOR :COMMAND :<NAME> [:AUTH "<token>"] [:REQUEST-ID "<id>"] <arguments>)
//   answered by one :RESPONSE (make_ok_response / make_error_response; the
//   :REQUEST-ID, when sent, is echoed at the top level). Commands, their
//   arguments, and the keys of the :OK payload after :MESSAGE:
//     :STATUS                      :VERSION "v" :UPTIME-S n :HEALTH :<H> :CONNECTIONS n
//                                  :SIGNALS-PROCESSED n :IN-FLIGHT n :PENDING-APPROVALS n
//                                  :APPROVALS-REFUSED n (requests refused since start because
//                                  --max-pending-approvals[-per-session] were reached)
//                                  :SKILLS (<skill> ...)
//     :SKILLS                      :SKILLS (<skill> ...) in load order, where <skill> is
//                                  (:NAME "n" :VERSION "v" :PRIORITY n :STATE :LOADED|:DISABLED
//                                   :REASON "why disabled" :SHA256 "hex" :GATE T|NIL
//                                   :VERIFIED n :BLOCKED n :FAILED n
//                                   [:ACTUATORS (:SHELL ...) :TOOLS ("read-file" ...)
//                                    :GUARDED-BY ("shell-guard" ...)
//                                    [:UNGUARDED "is guarded by shell-guard, which is not loaded"]])
//                                  the bracketed keys for a skill that offers actuators or tools
//     :LOAD :MANIFEST "path"       :CHANGES (<change> ...)
//     :RELOAD :NAME "n"            :CHANGES (<change> ...)
//     :UNLOAD :NAME "n" [:CASCADE T | :FORCE T]  :CHANGES (<change> ...); a skill others depend
//                                  on or are guarded by is refused without one (:FORCE
//                                  removes a guard alone: what it guards then fails closed)
//     :RESCAN                      :CHANGES (<change> ...)
//     :HISTORY [:LIMIT n] [:SKILL "n"]  :CHANGES (<change> ...) newest first, where <change> is
//                                  (:KIND "swap" :SKILL "n" :FROM-VERSION "v" :FROM-SHA256 "hex"
//                                   :TO-VERSION "v" :TO-SHA256 "hex" :OUTCOME "ok"|"refused"|"failed"
//                                   :STEP "step" :ERROR "text" :REQUESTER "who" :DURATION-US n :AT-UNIX-MS n)
//     :APPROVALS [:LIMIT n] [:OFFSET n]  :APPROVALS (<approval> ...) :TOTAL n :OFFSET n :LIMIT n:
//                                  one page of the pending approvals, newest first (:LIMIT 1 to
//                                  1000, default 100; :OFFSET 0 or more, default 0); :TOTAL counts
//                                  every pending one. <approval> is
//                                  (:TOKEN "hex" :STATE :PENDING|:APPROVED|:DENIED|:EXPIRED
//                                   :SESSION-ID "s" :ACTION <action> :REASON "r"
//                                   :GATES ("name@version" ...) :CREATED-UNIX-MS n :EXPIRES-UNIX-MS n
//                                   [:DECIDED-BY "who" :DECIDED-UNIX-MS n]
//                                   [:RUN :RUNNING|:DONE|:FAILED|:INTERRUPTED [:RUN-ERROR "why"]])
//                                  the decision once decided; the run once an approved action has
//                                  started (:INTERRUPTED: the daemon stopped while it ran)
//     :APPROVAL :TOKEN "hex"       :APPROVAL <approval>, in whatever state (until its retention ends)
//     :APPROVE :TOKEN "hex"        :RESULT <what the actuator answered>
//     :DENY :TOKEN "hex"           (nothing more)
//     :DENY :SESSION "s"           :DENIED n :SESSION "s": every pending approval of the session
//                                  (its :META :SESSION-ID), in one transaction; 0 when none was
//     :SHUTDOWN                    (nothing more; the daemon then stops as on SIGTERM)
//   When a change is refused or fails, the answer is :ERROR with code
//   :REFUSED and a message naming the skill, the step and the error (the old
//   version keeps serving; the audit log has the details); its payload still
//   carries :CHANGES (every change of the request, with its :OUTCOME), so a
//   :RESCAN that was refused in part lists what did change. Unknown commands
//   and bad arguments get :BAD-REQUEST, unknown skills or tokens :NOT-FOUND,
//   operator requests over TCP without the token :UNAUTHORIZED (the
//   :REQUEST-ID, when sent, is echoed on every one of these). A disabled
//   skill in :SKILLS has :STATE :DISABLED and :REASON, and :VERSION ""
//   when its manifest could not be read.
//   The token is the first line of <state dir>/token (daemon/token_file.hpp).
//   Over TCP every request needs the token (--tcp-auth all, the default):
//   one without it gets :UNAUTHORIZED. With --tcp-auth user-input (loopback
//   only), plain user input — (:TYPE :EVENT :PAYLOAD (:SENSOR :USER-INPUT
//   ...)) with no :TARGET — may come without it, as the seeds' Lisp peers
//   send it; an action it leads to that needs approval is then blocked
//   instead (only an authenticated client may ask a human).

// Codes carried by error responses (keyword names, without the ':').
namespace wire_error {
inline constexpr std::string_view kBadFrame = "BAD-FRAME";             // malformed frame; the connection closes
inline constexpr std::string_view kFrameTooLarge = "FRAME-TOO-LARGE";  // announced length over the limit; closes
inline constexpr std::string_view kBusy = "BUSY";                      // too many connections; closes
inline constexpr std::string_view kTimeout = "TIMEOUT";             // a frame or an idle connection timed out; closes
inline constexpr std::string_view kShuttingDown = "SHUTTING-DOWN";  // the daemon is stopping
inline constexpr std::string_view kUnauthorized = "UNAUTHORIZED";   // an operator request without a valid token
inline constexpr std::string_view kInternal = "INTERNAL";           // the handler failed
inline constexpr std::string_view kReplyTooLarge = "REPLY-TOO-LARGE";  // the reply exceeded the frame limit
inline constexpr std::string_view kBadRequest = "BAD-REQUEST";         // unknown command or missing/ill-typed argument
inline constexpr std::string_view kNotFound = "NOT-FOUND";             // no such skill, token or file
inline constexpr std::string_view kRefused = "REFUSED";                // the runtime refused the change or decision
}  // namespace wire_error

// What a health check reports: a keyword name (e.g. "HEALTHY", "DEGRADED";
// "UNKNOWN" before the first check) and whether a check has run.
struct HealthReport {
  std::string status = "UNKNOWN";
  bool checked = false;
};

// The handshake frame's message. `capabilities` are keyword names.
Value make_handshake(std::string_view version, std::span<const std::string> capabilities);
Value make_health_response(const HealthReport& report);
// `text` must be valid UTF-8 (a delta cut inside a character is the caller's bug).
Value make_stream_chunk(std::string_view text);
// An :OK response; `extra` (a plist or NIL) is appended to the payload after :MESSAGE.
Value make_ok_response(std::string_view message, const Value& extra = Value());
// An :ERROR response with `code` (a keyword name such as wire_error::kBadFrame).
// Bytes of `message` that are not valid UTF-8 are replaced by '?'.
Value make_error_response(std::string_view code, std::string_view message);
// The error response for a frame the decoder refused.
Value make_frame_error_response(const FrameError& error);

// The name of the :TYPE keyword (upper case), or empty when there is none.
std::string_view message_type(const Value& message) noexcept;
bool is_handshake(const Value& message) noexcept;
bool is_health_check(const Value& message) noexcept;
bool is_health_response(const Value& message) noexcept;
bool is_stream_chunk(const Value& message) noexcept;
// A :RESPONSE whose :STATUS is :OK / :ERROR.
bool is_ok_response(const Value& message) noexcept;
bool is_error_response(const Value& message) noexcept;
// The :PAYLOAD :CODE keyword name of an error response; empty otherwise.
std::string_view error_response_code(const Value& message) noexcept;
// The top-level :AUTH string, if the message carries one.
std::optional<std::string_view> auth_token(const Value& message) noexcept;

}  // namespace passepartout
