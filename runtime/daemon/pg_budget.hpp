// The budget's caps across a fleet (--state-db): SharedCaps over the state
// database. A reservation is one transaction: the cap rows it needs are
// created, locked in one order (so that concurrent reservations cannot
// deadlock), and raised only if every one of them still fits (spent +
// reserved + amount <= limit), with a hold row per cap naming this node.
// Settling or releasing moves the hold off the count, once: the hold row
// goes in the same transaction. A node's holds left by an earlier run of
// it (killed during calls) are counted as spent at their worst case when
// it starts, never twice. Each call waits on the calling thread, never on
// the database's loop, at most `timeout`.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "base/result.hpp"
#include "providers/budget.hpp"

namespace passepartout {

class PgClient;

// `client` must outlive the result and run on a loop of its own. The
// abandoned holds of `node` are settled at their worst case now (logged),
// or, while the database is away, at the first reservation that reaches it.
std::shared_ptr<SharedCaps> make_pg_shared_caps(PgClient& client, std::string node,
                                                std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace passepartout
