// The fleet on a real PostgreSQL 15 (a private cluster each benchmark
// starts).
//
// BM_FleetReserve: a budget reservation held for the fleet.
//
// BM_FleetDecisions: three nodes shipping their decision logs.
//
// BM_FleetRollout: three daemons and a skill's release rolled out, and a failing one halted.
//
// BM_FleetClaim: the fleet's approvals, with three nodes, each with its own
// connections, listening for decisions and polling every 20 ms, as
// FleetRunner does, and racing to claim every approved run. 10,000 trials, a
// quarter each of: approved on another node (the notification wakes the node
// that asked); approved behind the nodes' backs (no notification: the poll
// finds it); asked by a node that claimed the run and died before starting
// it; asked by a node that claimed it and was paused past its lease, which
// then tries to start and to finish it. The dead and paused node's lease is
// expired by SQL, as the time passing would. Reported: fleet_claim_p50_us /
// _p99_us (approve on one node until the node that asked holds the claim,
// the notification's path), and the soak's trials, duplicate runs and lost
// runs.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/executor.hpp"
#include "bench_caps.hpp"
#include "daemon/decision_shipper.hpp"
#include "daemon/pg_approvals.hpp"
#include "daemon/pg_budget.hpp"
#include "daemon_process.hpp"
#include "pipeline/decision_log.hpp"
#include "pipeline/signal.hpp"
#include "providers/budget.hpp"
#include "store/pg_client.hpp"
#include "store/pg_schema.hpp"
#include "support/postgres_cluster.hpp"
#include "value/sexp_reader.hpp"

namespace {

using namespace passepartout;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kTrials = 10000;
constexpr int kLive = 3;

PgOutcome wait_batch(PgClient& client, std::vector<PgStatement> statements) {
  std::promise<PgOutcome> promise;
  auto future = promise.get_future();
  client.run(std::move(statements), [&promise](PgOutcome&& outcome) { promise.set_value(std::move(outcome)); });
  return future.get();
}

// One node: its connection, its store, and a worker that claims and runs
// what its notifications and its poll bring.
struct Node {
  std::string name;
  EventLoops loop{1};
  std::unique_ptr<PgClient> client;
  std::unique_ptr<ApprovalStore> store;
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<std::string> queue;
  bool stopping = false;
  std::thread worker, poller;
};

struct Soak {
  std::mutex mutex;
  std::map<std::string, int> runs;                      // successful starts, by token
  std::map<std::string, Clock::time_point> claimed_at;  // when the asking node's claim came back
  std::map<std::string, std::string> dead;              // token -> the node that must not run it
  std::condition_variable ran;
};

void run_one(Node& node, Soak& soak, const std::string& token) {
  {
    const std::lock_guard lock(soak.mutex);
    const auto dead = soak.dead.find(token);
    if (dead != soak.dead.end() && dead->second == node.name) return;  // a dead node runs nothing
  }
  auto claim = node.store->claim_run(token);
  if (!claim || !*claim) return;
  const auto now = Clock::now();
  {
    const std::lock_guard lock(soak.mutex);
    soak.claimed_at.emplace(token, now);
  }
  if (!node.store->record_run(token, Approval::Run::running, **claim)) return;
  {
    const std::lock_guard lock(soak.mutex);
    ++soak.runs[token];
  }
  soak.ran.notify_all();
  static_cast<void>(node.store->record_run(token, Approval::Run::done, **claim));
}

void BM_FleetClaim(benchmark::State& state) {
  for (auto _ : state) {
    testing::PostgresCluster cluster;
    const std::string conninfo = cluster.conninfo(cluster.create_database());
    const auto connect = [&](EventLoops& loop) {
      PgClient::Options options;
      options.conninfo = conninfo;
      auto client = std::make_unique<PgClient>(*loop.contexts().front(), options);
      client->start();
      return client;
    };
    EventLoops admin_loop(1);
    auto admin = connect(admin_loop);
    {
      std::promise<Result<PgSchemaOutcome>> migrated;
      migrate(*admin, state_schema(), "bench", [&](Result<PgSchemaOutcome> outcome) { migrated.set_value(outcome); });
      if (!migrated.get_future().get()) {
        state.SkipWithError("the state database could not be migrated");
        return;
      }
    }
    Soak soak;
    std::vector<std::unique_ptr<Node>> nodes;
    for (int i = 0; i < kLive + 1; ++i) {  // the last one is the node that dies or is paused
      auto node = std::make_unique<Node>();
      node->name = "node-" + std::to_string(i);
      node->client = connect(node->loop);
      auto store = open_pg_approvals(*node->client, {node->name});
      if (!store) {
        state.SkipWithError(store.error().message.c_str());
        return;
      }
      node->store = std::move(*store);
      nodes.push_back(std::move(node));
    }
    // The live nodes are seen (their rows renewed) throughout; the last never is.
    for (int i = 0; i < kLive; ++i) {
      wait_batch(*admin, {{"INSERT INTO passepartout_nodes VALUES ($1, 'bench', now(), now() + interval '1 day')",
                           {nodes[static_cast<std::size_t>(i)]->name}}});
    }
    for (int i = 0; i < kLive; ++i) {
      Node& node = *nodes[static_cast<std::size_t>(i)];
      node.client->listen(std::string(kApprovalsChannel), [&node](std::string_view token) {
        {
          const std::lock_guard lock(node.mutex);
          node.queue.emplace_back(token);
        }
        node.wake.notify_one();
      });
      node.worker = std::thread([&node, &soak] {
        std::unique_lock lock(node.mutex);
        for (;;) {
          node.wake.wait(lock, [&node] { return node.stopping || !node.queue.empty(); });
          if (node.stopping) return;
          const std::string token = std::move(node.queue.front());
          node.queue.pop_front();
          lock.unlock();
          run_one(node, soak, token);
          lock.lock();
        }
      });
      node.poller = std::thread([&node, &soak] {
        std::unique_lock lock(node.mutex);
        while (!node.wake.wait_for(lock, 20ms, [&node] { return node.stopping; })) {
          lock.unlock();
          if (auto tokens = node.store->claimable()) {
            for (const std::string& token : *tokens) run_one(node, soak, token);
          }
          lock.lock();
        }
      });
    }
    // Every node has sent its LISTEN once a batch after it is answered.
    for (int i = 0; i < kLive; ++i) wait_batch(*nodes[static_cast<std::size_t>(i)]->client, {{"SELECT 1", {}}});

    const Value action = *read_sexp("(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"echo soak\"))");
    std::vector<double> claim_us;
    std::size_t lost = 0, stale_writes = 0;
    Node& gone = *nodes.back();
    for (int trial = 0; trial < kTrials; ++trial) {
      const int kind = trial % 4;
      Node& asking = kind < 2 ? *nodes[static_cast<std::size_t>(trial % kLive)] : gone;
      Node& approving = *nodes[static_cast<std::size_t>((trial + 1) % kLive)];
      const Value meta = *read_sexp("(:SESSION-ID \"s" + std::to_string(trial % 16) + "\")");
      auto created = asking.store->create(action, meta, {"bench@1.0.0"}, "soak");
      if (!created) {
        state.SkipWithError(created.error().message.c_str());
        return;
      }
      const std::string& token = created->token;
      std::int64_t stale_fence = 0;
      Clock::time_point asked;
      if (kind == 0) {  // the notification's path
        asked = Clock::now();
        if (!approving.store->approve(token, "bench")) ++lost;
      } else if (kind == 1) {  // decided with no notification: the poll finds it
        wait_batch(
            *admin,
            {{"UPDATE passepartout_approvals SET state = 'approved', decided_by = 'sql' WHERE token = $1", {token}}});
      } else {  // the node that asked claims it, then dies (2) or is paused past its lease (3)
        {
          const std::lock_guard lock(soak.mutex);
          soak.dead.emplace(token, gone.name);
        }
        // Approved and claimed by it in one step (no live node can claim it
        // first), with the lease already run out: the time it was gone.
        const PgOutcome claimed = wait_batch(
            *admin,
            {{"UPDATE passepartout_approvals SET state = 'approved', decided_by = 'sql', run_state = 'claimed', "
              "run_node = $2, run_fence = run_fence + 1, run_lease_until_ms = 0 WHERE token = $1 "
              "RETURNING run_fence",
              {token, gone.name}}});
        if (claimed.ok() && !claimed.results[0].rows.empty()) stale_fence = std::stoll(*claimed.results[0].rows[0][0]);
      }
      {
        std::unique_lock lock(soak.mutex);
        if (!soak.ran.wait_for(lock, 10s, [&] { return soak.runs.count(token) != 0; })) ++lost;
        if (kind == 0 && soak.claimed_at.count(token) != 0) {
          claim_us.push_back(std::chrono::duration<double, std::micro>(soak.claimed_at[token] - asked).count());
        }
      }
      if (kind == 3 && stale_fence != 0) {  // it wakes up: it may start nothing, finish nothing
        if (gone.store->record_run(token, Approval::Run::running, stale_fence)) ++stale_writes;
        if (gone.store->record_run(token, Approval::Run::done, stale_fence)) ++stale_writes;
      }
    }
    // Late duplicates would show within a few polls.
    std::this_thread::sleep_for(200ms);
    for (auto& node : nodes) {
      {
        const std::lock_guard lock(node->mutex);
        node->stopping = true;
      }
      node->wake.notify_all();
      if (node->worker.joinable()) node->worker.join();
      if (node->poller.joinable()) node->poller.join();
    }
    std::size_t duplicates = stale_writes;
    {
      const std::lock_guard lock(soak.mutex);
      for (const auto& [token, runs] : soak.runs) duplicates += static_cast<std::size_t>(std::max(0, runs - 1));
    }
    std::sort(claim_us.begin(), claim_us.end());
    state.counters["fleet_claim_p50_us"] = claim_us.empty() ? 0 : claim_us[claim_us.size() / 2];
    state.counters["fleet_claim_p99_us"] = claim_us.empty() ? 0 : claim_us[claim_us.size() * 99 / 100];
    state.counters["fleet_soak_trials"] = kTrials;
    state.counters["fleet_soak_duplicate_runs"] = static_cast<double>(duplicates);
    state.counters["fleet_soak_lost_runs"] = static_cast<double>(lost);
    for (auto& node : nodes) {
      node->client->stop();
      node->store.reset();
    }
    admin->stop();
  }
}

// A client on `loop`'s thread to `conninfo`, its database migrated to this
// build's schema; null when it could not be.
std::unique_ptr<PgClient> migrated_client(EventLoops& loop, const std::string& conninfo) {
  PgClient::Options options;
  options.conninfo = conninfo;
  auto client = std::make_unique<PgClient>(*loop.contexts().front(), options);
  client->start();
  std::promise<Result<PgSchemaOutcome>> migrated;
  migrate(*client, state_schema(), "bench", [&](Result<PgSchemaOutcome> outcome) { migrated.set_value(outcome); });
  if (!migrated.get_future().get()) return nullptr;
  return client;
}

// One call's reservation against a daily dollar cap and a session token cap
// held for the fleet (one round trip to the database on top of the node's
// own count), and its settlement; fleet_reserve_p50_us is the reservation.
void BM_FleetReserve(benchmark::State& state) {
  constexpr int kWarmup = 200;
  constexpr int kCalls = 2000;
  for (auto _ : state) {
    testing::PostgresCluster cluster;
    const std::string conninfo = cluster.conninfo(cluster.create_database());
    EventLoops loop(1);
    const std::unique_ptr<PgClient> connected = migrated_client(loop, conninfo);
    if (!connected) {
      state.SkipWithError("the state database could not be migrated");
      return;
    }
    PgClient& client = *connected;
    std::random_device random;
    const auto dir = std::filesystem::temp_directory_path() / ("passepartout-bench-fleet-" + std::to_string(random()));
    {
      const BudgetConfig config = bench::daily_and_session_caps();
      auto budget = Budget::open(usage_file(dir), config, PriceTable::builtin());
      if (!budget) {
        state.SkipWithError(budget.error().message.c_str());
        return;
      }
      (*budget)->share(make_pg_shared_caps(client, "bench"));
      const BudgetCall call{"openai", "gpt-4o-mini", "bench-session", false, 1200, 1024};
      TokenUsage usage;
      usage.input = 1200;
      usage.output = 80;
      std::vector<double> us;
      for (int i = 0; i < kWarmup + kCalls; ++i) {
        Budget::Reservation reservation;
        const auto start = Clock::now();
        if ((*budget)->reserve(call, reservation)) {
          state.SkipWithError("a reservation was refused");
          return;
        }
        const auto took = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
        (*budget)->settle(reservation, usage);
        if (i >= kWarmup) us.push_back(took);
      }
      std::sort(us.begin(), us.end());
      state.counters["fleet_reserve_p50_us"] = us[us.size() / 2];
      state.counters["fleet_reserve_p99_us"] = us[us.size() * 99 / 100];
    }
    client.stop();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
}

// A record as large as a daemon's (~1.5 KB: the action and the signal
// printed, a gate's reason), blocked so that it is never sampled away.
void record_decision(DecisionLog& log, const Value& action, const Value& signal, int n) {
  Verification v;
  v.outcome = VerifyOutcome::blocked;
  v.reason = Value::string("blocked by the benchmark's rule, decision " + std::to_string(n));
  v.trace.push_back(nullptr, GateResult::blocked, v.reason);
  GateTimes times;
  times.count = 0;
  const IntervalClock::Ticks now = IntervalClock::now();
  log.record(DecisionStage::last_mile, nullptr, action, signal, v, times, now, now, {});
}

// Three nodes' decision logs shipping to one database, each node's with its
// own connection and thread, as three daemons' do. First each node records
// kBurst decisions as fast as its log takes them: fleet_decisions_per_s is
// how many reach the table per second, from the first decision's time to
// the last row's. Then each records kPacedPerSecond a second for two
// seconds: fleet_ship_lag_p99_ms is a decision's time to its row's, the
// 99th percentile (the log's writer's batching included).
void BM_FleetDecisions(benchmark::State& state) {
  constexpr int kNodes = 3;
  constexpr int kBurst = 20000;
  constexpr int kPacedPerSecond = 2000;
  constexpr auto kPaced = 2s;
  for (auto _ : state) {
    testing::PostgresCluster cluster;
    const std::string conninfo = cluster.conninfo(cluster.create_database());
    {
      EventLoops loop(1);
      const std::unique_ptr<PgClient> client = migrated_client(loop, conninfo);
      if (!client) {
        state.SkipWithError("the state database could not be migrated");
        return;
      }
      client->stop();
    }
    std::random_device random;
    const auto root = std::filesystem::temp_directory_path() / ("passepartout-bench-ship-" + std::to_string(random()));
    const Value action = *read_sexp(
        "(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"ls -la /srv/reports/2026/12 | sort -k5 -n | tail -20\" "
        ":EXPLANATION \"" +
        std::string(420, 'e') + "\"))");
    struct Node {
      std::unique_ptr<DecisionShipper> shipper;
      std::unique_ptr<DecisionLog> log;
    };
    std::vector<Node> nodes(kNodes);
    for (int i = 0; i < kNodes; ++i) {
      const auto folder = root / ("node-" + std::to_string(i));
      DecisionShipper::Options ship;
      ship.conninfo = conninfo;
      ship.node = "node-" + std::to_string(i);
      ship.folder = folder;
      nodes[i].shipper = std::make_unique<DecisionShipper>(ship);
      DecisionLogOptions options;
      options.folder = folder;
      options.buffer = kBurst;  // the burst is kept whole: shipping is measured, not the buffer
      DecisionShipper* shipper = nodes[i].shipper.get();
      options.unshipped = [shipper](const std::filesystem::path& file) { return shipper->unshipped(file); };
      options.written = [shipper] { shipper->nudge(); };
      auto log = DecisionLog::open(options);
      if (!log) {
        state.SkipWithError(log.error().message.c_str());
        return;
      }
      nodes[i].log = std::move(*log);
      nodes[i].shipper->start();
    }
    const auto run_nodes = [&](const std::function<void(Node&, int)>& work) {
      std::vector<std::thread> threads;
      for (int i = 0; i < kNodes; ++i) threads.emplace_back([&, i] { work(nodes[i], i); });
      for (auto& thread : threads) thread.join();
    };
    const auto drained = [&] {
      for (Node& node : nodes) {
        node.log->flush();
        if (!node.shipper->drain(120s)) return false;
      }
      return true;
    };
    const Value burst_signal = user_input_signal(std::string(700, 'b'), "burst");
    run_nodes([&](Node& node, int) {
      for (int n = 0; n < kBurst; ++n) record_decision(*node.log, action, burst_signal, n);
    });
    if (!drained()) {
      state.SkipWithError("the burst was not shipped within two minutes");
      return;
    }
    const Value paced_signal = user_input_signal(std::string(700, 'p'), "paced");
    run_nodes([&](Node& node, int) {
      const auto start = Clock::now();
      const auto every = std::chrono::nanoseconds(1s) / kPacedPerSecond;
      for (int n = 0; Clock::now() - start < kPaced; ++n) {
        std::this_thread::sleep_until(start + every * n);
        record_decision(*node.log, action, paced_signal, n);
      }
    });
    if (!drained()) {
      state.SkipWithError("the paced decisions were not shipped within two minutes");
      return;
    }
    const PgOutcome figures = pg_run_once(
        conninfo,
        {{"SELECT count(*) AS n, extract(epoch FROM max(shipped_at) - min(time)) AS s FROM passepartout_decisions "
          "WHERE session = 'burst'",
          {}},
         {"SELECT count(*) AS n, percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM shipped_at - time) "
          "* 1000) AS p99 FROM passepartout_decisions WHERE session = 'paced'",
          {}},
         {"SELECT count(*) - count(DISTINCT (node, id)) AS twice FROM passepartout_decisions", {}}},
        30s);
    if (!figures.ok()) {
      state.SkipWithError(figures.error->message.c_str());
      return;
    }
    const auto number = [&](std::size_t result, const char* column) {
      return std::stod(std::string(figures.results[result].at(0, column).value_or("0")));
    };
    if (number(0, "n") != kNodes * kBurst) {
      state.SkipWithError("the table does not hold every decision of the burst");
      return;
    }
    if (number(2, "twice") != 0) {
      state.SkipWithError("a decision was shipped twice");
      return;
    }
    state.counters["fleet_decisions_per_s"] = number(0, "n") / number(0, "s");
    state.counters["fleet_ship_lag_p99_ms"] = number(1, "p99");
    state.counters["fleet_ship_paced_decisions"] = number(1, "n");
    for (Node& node : nodes) {
      node.log.reset();
      node.shipper->stop();
    }
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
}

// `passepartout ARGS...`, its output discarded; its exit status.
int run_cli(std::vector<std::string> args) {
  args.insert(args.begin(), PP_PASSEPARTOUT_EXE);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int spawned = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return -1;
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// One exchange on `client`, whatever the gates decide (a failing canary blocks).
void exchange(bench::Client& client, long id) {
  client.send_chat(id);
  const std::string request_id = std::to_string(id);
  for (;;) {
    const Value frame = client.read_frame();
    if (frame.at("TYPE").is_keyword("RESPONSE") && frame.at("REQUEST-ID").text() == request_id) return;
  }
}

// Three daemons (the real executable) on one database, each with the bundled
// skills and shadow-gate 1.0.0 (passes), a fleet lease of 1.5 s (a node's
// agent looks every 0.5 s, and at once on a notification). fleet_rollout_s:
// `fleet publish` of shadow-gate 2.0.0 to every node running it, through
// `--stages shadow,100% --dwell 1 --min-verifications 1` while each node
// answers a chat every 10 ms; the two stages' dwell (2 s) is its floor,
// reported as fleet_rollout_floor_s. fleet_halt_s: a release whose gate
// throws, rolled out to a third of the nodes (one canary), from `fleet
// rollout` to the rollout halted and the canary back on the version it ran.
void BM_FleetRollout(benchmark::State& state) {
  for (auto _ : state) {
    testing::PostgresCluster cluster;
    const std::string conninfo = cluster.conninfo(cluster.create_database());
    std::random_device random;
    const auto root =
        std::filesystem::temp_directory_path() / ("passepartout-bench-rollout-" + std::to_string(random()));
    std::vector<std::unique_ptr<bench::ServerProcess>> nodes;
    std::vector<std::unique_ptr<bench::Client>> clients;
    for (int i = 0; i < 3; ++i) {
      const auto dir = root / ("node-" + std::to_string(i));
      std::filesystem::create_directories(dir / "plugins");
      std::filesystem::create_directories(dir / "manifests");
      for (const auto& entry : std::filesystem::directory_iterator(PP_PLUGIN_DIR)) {
        if (entry.path().extension() == ".so")
          std::filesystem::copy_file(entry.path(), dir / "plugins" / entry.path().filename());
      }
      for (const auto& entry : std::filesystem::directory_iterator(PP_MANIFEST_DIR)) {
        std::filesystem::copy_file(entry.path(), dir / "manifests" / entry.path().filename());
      }
      std::filesystem::copy_file(std::filesystem::path(PP_FIXTURE_DIR) / "libshadow-gate-1.so",
                                 dir / "plugins" / "libshadow-gate-1.so");
      std::ofstream(dir / "manifests" / "shadow-gate.yaml")
          << "name: shadow-gate\nversion: 1.0.0\nlibrary: libshadow-gate-1.so\nabi: 1\npriority: 999\n"
             "isolation: in-process\nconfig: { mode: pass }\n";
      std::ofstream(dir / "script.yaml") << "rules:\n  - match: \"ping\"\n    reply: \"pong\"\n";
      std::vector<std::string> args = bench::daemon_args(dir);
      for (std::size_t a = 0; a + 1 < args.size(); ++a) {
        if (args[a] == "--manifests") args[a + 1] = (dir / "manifests").string();
        if (args[a] == "--plugins") args[a + 1] = (dir / "plugins").string();
      }
      args.insert(args.end(),
                  {"--state-db", conninfo, "--node-id", "node-" + std::to_string(i), "--fleet-lease", "1.5"});
      nodes.push_back(std::make_unique<bench::ServerProcess>(dir, args));
      std::string token = bench::slurp(dir / "token");
      while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
      clients.push_back(std::make_unique<bench::Client>(nodes.back()->port(), token));
    }
    // Each node answers a chat every 10 ms while `done` says not yet.
    const auto traffic_until = [&](const std::function<bool()>& done) {
      long id = 0;
      const auto deadline = Clock::now() + 120s;
      while (!done()) {
        if (Clock::now() > deadline) return false;
        for (auto& client : clients) exchange(*client, ++id);
        std::this_thread::sleep_for(10ms);
      }
      return true;
    };
    const auto every_node_runs = [&](const std::string& version, const char* state) {
      const PgOutcome asked = pg_run_once(
          conninfo,
          {{"SELECT count(*) FILTER (WHERE skills LIKE '%shadow-gate@' || $1 || '%') AS running FROM "
            "passepartout_nodes",
            {version}},
           {"SELECT count(*) AS n FROM passepartout_rollouts WHERE state = $1 AND id = (SELECT max(id) FROM "
            "passepartout_rollouts)",
            {state}}},
          10s);
      return asked.ok() && asked.results[0].integer(0, "running") == 3 && asked.results[1].integer(0, "n") == 1;
    };
    const auto release = [&](const std::string& version, const std::string& mode) {
      const auto manifest = root / ("release-" + version + "-" + mode + ".yaml");
      std::ofstream(manifest) << "name: shadow-gate\nversion: " << version << "\nlibrary: libshadow-gate-"
                              << version.substr(0, 1) << ".so\nabi: 1\npriority: 999\nisolation: in-process\n"
                              << "config: { mode: " << mode << " }\n";
      return manifest;
    };

    const auto started = Clock::now();
    if (run_cli({"fleet", "publish", release("2.0.0", "pass").string(),
                 (std::filesystem::path(PP_FIXTURE_DIR) / "libshadow-gate-2.so").string(), "--state-db", conninfo}) !=
            0 ||
        run_cli({"fleet", "rollout", "shadow-gate", "2.0.0", "--stages", "shadow,100%", "--dwell", "1",
                 "--min-verifications", "1", "--state-db", conninfo}) != 0) {
      state.SkipWithError("the release could not be published or rolled out");
      return;
    }
    if (!traffic_until([&] { return every_node_runs("2.0.0", "done"); })) {
      state.SkipWithError("the rollout did not reach every node within two minutes");
      return;
    }
    const double rollout_s = std::chrono::duration<double>(Clock::now() - started).count();

    if (run_cli({"fleet", "publish", release("1.0.0", "throw").string(),
                 (std::filesystem::path(PP_FIXTURE_DIR) / "libshadow-gate-1.so").string(), "--state-db", conninfo}) !=
        0) {
      state.SkipWithError("the failing release could not be published");
      return;
    }
    const auto halting = Clock::now();
    if (run_cli({"fleet", "rollout", "shadow-gate", "1.0.0", "--stages", "33%,100%", "--dwell", "1", "--state-db",
                 conninfo}) != 0) {
      state.SkipWithError("the failing release could not be rolled out");
      return;
    }
    if (!traffic_until([&] { return every_node_runs("2.0.0", "halted"); })) {
      state.SkipWithError("the failing canary was not rolled back within two minutes");
      return;
    }
    const double halt_s = std::chrono::duration<double>(Clock::now() - halting).count();
    state.counters["fleet_rollout_s"] = rollout_s;
    state.counters["fleet_rollout_floor_s"] = 2.0;
    state.counters["fleet_halt_s"] = halt_s;
    clients.clear();
    for (auto& node : nodes) node->stop();
    nodes.clear();
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
}

}  // namespace

BENCHMARK(BM_FleetRollout)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_FleetDecisions)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_FleetReserve)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_FleetClaim)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
