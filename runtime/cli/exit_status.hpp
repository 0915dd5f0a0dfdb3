// The exit statuses of `passepartout` commands, shared by every command group
// and documented in the top-level --help.
#pragma once

namespace passepartout::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitProblem = 1;       // something would not load, a command failed, the daemon is unreachable
inline constexpr int kExitUsage = 2;         // bad arguments or unreadable input
inline constexpr int kExitBlocked = 3;       // verify, chat: the gates blocked the action
inline constexpr int kExitApproval = 4;      // verify, chat: the gates want a human's approval
inline constexpr int kExitNoModel = 5;       // chat: no model answered (every provider failed)
inline constexpr int kExitDisconnected = 6;  // interactive chat: the daemon could not be reached again
inline constexpr int kExitChanged = 7;       // verify --replay: a recorded decision's outcome would change

}  // namespace passepartout::cli
