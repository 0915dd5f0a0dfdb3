// Real providers: the daemon as a child process with the `openai` preset
// pointed at a loopback model API in this process (model_stub.hpp), measured
// from outside over TCP loopback:
//   BM_ProviderOverhead   chat round trip through the openai provider minus
//                         the same with the scripted one, and the stub's own
//                         round trip from a bare libcurl client beside it;
//   BM_Inflight1000       a thousand chats on distinct sessions whose model
//                         answers after a second: wall time, threads and
//                         resident memory the daemon added for them;
//   BM_StreamChunkLatency from the stub writing a streamed chunk to the
//                         client reading its :STREAM-CHUNK frame (one clock:
//                         the stub and the client share this process);
//   BM_Consensus3Overhead a chat whose answer three providers must agree on
//                         (consensus on every proposal, quorum 2, the three
//                         calls at once) minus the same chat with one provider,
//                         both against the stub answering at once; and the
//                         floor, two more calls at the provider path's cost
//                         over the scripted one's, measured in the same run.
#include <benchmark/benchmark.h>
#include <curl/curl.h>

#include <poll.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "daemon_process.hpp"
#include "model_stub.hpp"

namespace {
using namespace passepartout;
using namespace passepartout::bench;

constexpr int kWarmup = 500;
constexpr int kRoundTrips = 10000;
constexpr std::size_t kInflight = 1000;
constexpr auto kModelPause = 1s;
constexpr int kStreamedAnswers = 40;
constexpr int kChunksPerAnswer = 50;

// `passepartout daemon` in `dir` with the `openai` preset only.
std::vector<std::string> openai_daemon_args(const fs::path& dir) {
  return {PP_PASSEPARTOUT_EXE, "daemon", "--port", "0", "--socket", (dir / "s.sock").string(), "--state-dir",
          dir.string(), "--provider", "openai", "--manifests", PP_MANIFEST_DIR, "--plugins", PP_PLUGIN_DIR,
          // a thousand clients come from 127.0.0.1 (the default allows 64 per address)
          "--max-connections-per-peer", "1024"};
}

std::vector<std::string> openai_env(const ModelStub& stub) {
  return {"OPENAI_API_KEY=sk-bench-not-a-key", "OPENAI_BASE_URL=" + stub.base_url()};
}

std::string token_of(const fs::path& dir) {
  std::string token = slurp(dir / "token");
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  return token;
}

// Sequential chat round trips of one client to `daemon`, in microseconds,
// and the CPU the daemon used per chat meanwhile. Each chat is the first of
// a session of its own: a real provider is sent the session's transcript,
// which would otherwise grow from one chat to the next (to a quarter of the
// preset's 128k-token window) and be measured instead of the call.
struct RoundTrips {
  std::vector<double> rtt;
  double daemon_cpu_us = 0;
};

RoundTrips chat_round_trips(const ServerProcess& daemon, const std::string& token) {
  Client client(daemon.port(), token);
  long id = 0;
  const auto session = [](long n) { return "rtt-" + std::to_string(n); };
  for (int i = 0; i < kWarmup; ++i) {
    ++id;
    client.chat(id, session(id));
  }
  RoundTrips out;
  out.rtt.reserve(kRoundTrips);
  const double cpu_before = daemon.cpu_us();
  for (int i = 0; i < kRoundTrips; ++i) {
    ++id;
    const std::string on = session(id);
    const auto sent = Clock::now();
    client.chat(id, on);
    out.rtt.push_back(std::chrono::duration<double, std::micro>(Clock::now() - sent).count());
  }
  out.daemon_cpu_us = (daemon.cpu_us() - cpu_before) / kRoundTrips;
  return out;
}

std::size_t discard(char* /*bytes*/, std::size_t size, std::size_t count, void* /*user*/) { return size * count; }

// The stub's own round trip: the request the daemon sent last, replayed from
// one reused libcurl easy handle (its connection kept), in microseconds.
std::vector<double> bare_curl_round_trips(const ModelStub& stub) {
  const std::string url = stub.base_url() + "/chat/completions";
  const std::string body = stub.last_body();
  curl_slist* headers = nullptr;
  for (const std::string& line : stub.last_headers()) headers = curl_slist_append(headers, line.c_str());
  headers = curl_slist_append(headers, "Expect:");
  CURL* easy = curl_easy_init();
  if (easy == nullptr) die("curl_easy_init failed");
  curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &discard);
  auto once = [&] {
    if (const CURLcode code = curl_easy_perform(easy); code != CURLE_OK) {
      die(std::string("bare libcurl request: ") + curl_easy_strerror(code));
    }
  };
  for (int i = 0; i < kWarmup; ++i) once();
  std::vector<double> rtt;
  rtt.reserve(kRoundTrips);
  for (int i = 0; i < kRoundTrips; ++i) {
    const auto sent = Clock::now();
    once();
    rtt.push_back(std::chrono::duration<double, std::micro>(Clock::now() - sent).count());
  }
  curl_easy_cleanup(easy);
  curl_slist_free_all(headers);
  return rtt;
}

// The chat round trips through the scripted provider, then through the
// openai one against `stub`, each in its own daemon given `extra` arguments.
struct Paths {
  RoundTrips scripted, openai;
};

Paths both_paths(const ModelStub& stub, const std::vector<std::string>& extra) {
  Paths out;
  {
    Scratch scratch;
    auto args = daemon_args(scratch.root);
    args.insert(args.end(), extra.begin(), extra.end());
    ServerProcess daemon(scratch.root, args);
    out.scripted = chat_round_trips(daemon, token_of(scratch.root));
    if (!daemon.stop()) die("the scripted daemon did not stop cleanly:\n" + daemon.log());
  }
  {
    Scratch scratch;
    auto args = openai_daemon_args(scratch.root);
    args.insert(args.end(), extra.begin(), extra.end());
    ServerProcess daemon(scratch.root, args, openai_env(stub));
    out.openai = chat_round_trips(daemon, token_of(scratch.root));
    if (!daemon.stop()) die("the openai daemon did not stop cleanly:\n" + daemon.log());
  }
  return out;
}

// A daemon whose config names `providers` (each the openai kind at `stub`)
// as its cascade, with `consensus` (YAML lines) when not empty.
std::vector<std::string> config_daemon_args(const fs::path& dir, const ModelStub& stub,
                                            const std::vector<std::string>& providers, const std::string& consensus) {
  std::ofstream config(dir / "passepartout.yaml");
  config << "providers:\n";
  std::string cascade;
  for (const std::string& name : providers) {
    config << "  - name: " << name << "\n    kind: openai\n    base_url: " << stub.base_url()
           << "\n    model: gpt-4o-mini\n    api_key_env: OPENAI_API_KEY\n";
    cascade += (cascade.empty() ? "" : ",") + name;
  }
  config << "provider_cascade: " << cascade << "\n";
  if (!consensus.empty()) config << "consensus:\n" << consensus;
  config.close();
  return {PP_PASSEPARTOUT_EXE,
          "daemon",
          "--port",
          "0",
          "--socket",
          (dir / "s.sock").string(),
          "--state-dir",
          dir.string(),
          "--config",
          (dir / "passepartout.yaml").string(),
          "--provider",
          cascade,
          "--manifests",
          PP_MANIFEST_DIR,
          "--plugins",
          PP_PLUGIN_DIR};
}

RoundTrips config_round_trips(const ModelStub& stub, const std::vector<std::string>& providers,
                              const std::string& consensus) {
  Scratch scratch;
  ServerProcess daemon(scratch.root, config_daemon_args(scratch.root, stub, providers, consensus),
                       {"OPENAI_API_KEY=sk-bench-not-a-key"});
  RoundTrips trips = chat_round_trips(daemon, token_of(scratch.root));
  if (!daemon.stop()) die("the daemon did not stop cleanly:\n" + daemon.log());
  return trips;
}

void BM_Consensus3Overhead(benchmark::State& state) {
  for (auto _ : state) {
    ModelStub stub(ModelStub::Mode::answer);
    const RoundTrips single = config_round_trips(stub, {"a"}, "");
    const RoundTrips three =
        config_round_trips(stub, {"a", "b", "c"}, "  providers: [a, b, c]\n  quorum: 2\n  when: always\n");
    RoundTrips scripted;
    {
      Scratch scratch;
      ServerProcess daemon(scratch.root, daemon_args(scratch.root));
      scripted = chat_round_trips(daemon, token_of(scratch.root));
      if (!daemon.stop()) die("the scripted daemon did not stop cleanly:\n" + daemon.log());
    }
    const double single_p50 = percentile(single.rtt, 0.5);
    const double three_p50 = percentile(three.rtt, 0.5);
    const double scripted_p50 = percentile(scripted.rtt, 0.5);
    state.counters["consensus_3_overhead_us"] = three_p50 - single_p50;
    // The floor: the two calls more, each costing what the provider path
    // costs over the scripted one (on two CPUs they do not overlap much),
    // and what the round itself adds beyond them.
    const double floor = 2 * (single_p50 - scripted_p50);
    state.counters["consensus_3_floor_us"] = floor;
    state.counters["consensus_3_round_us"] = three_p50 - single_p50 - floor;
    state.counters["consensus_scripted_rtt_p50_us"] = scripted_p50;
    state.counters["consensus_3_rtt_p50_us"] = three_p50;
    state.counters["consensus_single_rtt_p50_us"] = single_p50;
    state.counters["consensus_3_daemon_cpu_us"] = three.daemon_cpu_us;
    state.counters["consensus_single_daemon_cpu_us"] = single.daemon_cpu_us;
  }
}

void BM_ProviderOverhead(benchmark::State& state) {
  for (auto _ : state) {
    ModelStub stub(ModelStub::Mode::answer);
    const Paths polling = both_paths(stub, {});
    if (stub.requests() < std::size_t{kWarmup} + std::size_t{kRoundTrips}) die("the model stub was not asked");
    const std::vector<double> bare = bare_curl_round_trips(stub);
    // The same with the event loops sleeping as soon as they are idle
    // (--idle-poll 0): while the model answers, the two loops of a polling
    // daemon keep both virtual CPUs busy, and the stub's thread must take
    // one of them back.
    const Paths sleeping = both_paths(stub, {"--idle-poll", "0"});

    const auto p50 = [](const RoundTrips& trips) { return percentile(trips.rtt, 0.5); };
    state.counters["provider_overhead_us"] = p50(polling.openai) - p50(polling.scripted);
    state.counters["provider_stub_rtt_us"] = percentile(bare, 0.5);
    state.counters["provider_rtt_p50_us"] = p50(polling.openai);
    state.counters["scripted_rtt_p50_us"] = p50(polling.scripted);
    // Where the difference goes: the daemon's CPU per chat (user and kernel) on each path.
    state.counters["provider_daemon_cpu_us"] = polling.openai.daemon_cpu_us;
    state.counters["scripted_daemon_cpu_us"] = polling.scripted.daemon_cpu_us;
    state.counters["provider_overhead_idle_poll_0_us"] = p50(sleeping.openai) - p50(sleeping.scripted);
    state.counters["provider_rtt_p50_idle_poll_0_us"] = p50(sleeping.openai);
    state.counters["scripted_rtt_p50_idle_poll_0_us"] = p50(sleeping.scripted);
    state.counters["provider_daemon_cpu_idle_poll_0_us"] = sleeping.openai.daemon_cpu_us;
    state.counters["provider_request_bytes"] = static_cast<double>(stub.last_body().size());
  }
}

// Entries of /proc/<pid>/task: the daemon's threads.
std::size_t thread_count(pid_t pid) {
  std::error_code ec;
  std::size_t count = 0;
  for (fs::directory_iterator it("/proc/" + std::to_string(pid) + "/task", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++count;
  }
  return count;
}

// The soft descriptor limit raised to the hard one: this process holds a
// thousand client connections and the stub's thousand.
void raise_descriptor_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur < 2 * kInflight + 256) {
    die("the descriptor limit is too low for " + std::to_string(kInflight) + " clients (ulimit -n)");
  }
}

void BM_Inflight1000(benchmark::State& state) {
  raise_descriptor_limit();
  for (auto _ : state) {
    ModelStub stub(ModelStub::Mode::answer, kModelPause);
    Scratch scratch;
    ServerProcess daemon(scratch.root, openai_daemon_args(scratch.root), openai_env(stub));
    const std::string token = token_of(scratch.root);
    {
      Client warm(daemon.port(), token);  // the provider's first call: libcurl loaded, its client made
      warm.chat(1, "warm-up");
    }
    std::vector<std::unique_ptr<Client>> clients;
    clients.reserve(kInflight);
    for (std::size_t i = 0; i < kInflight; ++i) clients.push_back(std::make_unique<Client>(daemon.port(), token));
    const std::size_t threads_before = thread_count(daemon.pid());
    const double rss_before = daemon.rss_mb();
    std::size_t threads_most = threads_before;
    double rss_most = rss_before;
    auto sample = [&] {
      threads_most = std::max(threads_most, thread_count(daemon.pid()));
      rss_most = std::max(rss_most, daemon.rss_mb());
    };

    const auto began = Clock::now();
    for (std::size_t i = 0; i < kInflight; ++i)
      clients[i]->send_chat(static_cast<long>(i) + 1, "inflight-" + std::to_string(i));
    std::vector<pollfd> polled(kInflight);
    for (std::size_t i = 0; i < kInflight; ++i) polled[i] = {clients[i]->fd(), POLLIN, 0};
    std::vector<bool> answered(kInflight, false);
    std::size_t left = kInflight;
    auto last_sample = Clock::now();
    Clock::time_point last_answer = began;
    while (left > 0) {
      if (Clock::now() - began > kWait) die(std::to_string(left) + " chats were not answered:\n" + daemon.log());
      if (::poll(polled.data(), polled.size(), 20) < 0) die(std::string("poll: ") + std::strerror(errno));
      for (std::size_t i = 0; i < kInflight; ++i) {
        if ((polled[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        while (auto frame = clients[i]->try_read_frame()) {
          if (!frame->at("TYPE").is_keyword("RESPONSE")) continue;
          if (!frame->at("STATUS").is_keyword("OK")) die("chat " + std::to_string(i) + " failed: " + to_sexp(*frame));
          if (answered[i]) die("chat " + std::to_string(i) + " was answered twice");
          answered[i] = true;
          polled[i].events = 0;
          --left;
          last_answer = Clock::now();
        }
      }
      if (Clock::now() - last_sample > 20ms) {
        sample();
        last_sample = Clock::now();
      }
    }
    sample();
    if (stub.requests() < kInflight + 1) die("the model was asked fewer times than chats");

    state.counters["inflight_1000_wall_s"] = std::chrono::duration<double>(last_answer - began).count();
    state.counters["inflight_1000_threads_added"] = static_cast<double>(threads_most - threads_before);
    state.counters["inflight_1000_rss_mb"] = rss_most - rss_before;
    state.counters["inflight_1000_model_connections"] = static_cast<double>(stub.connections());
    clients.clear();
    if (!daemon.stop()) die("the daemon did not stop cleanly:\n" + daemon.log());
  }
}

void BM_StreamChunkLatency(benchmark::State& state) {
  for (auto _ : state) {
    ModelStub stub(ModelStub::Mode::stepped, {}, kChunksPerAnswer);
    Scratch scratch;
    ServerProcess daemon(scratch.root, openai_daemon_args(scratch.root), openai_env(stub));
    Client client(daemon.port(), token_of(scratch.root));
    std::vector<double> latency;
    latency.reserve(std::size_t{kStreamedAnswers} * std::size_t{kChunksPerAnswer});
    for (long id = 1; id <= kStreamedAnswers + 2; ++id) {    // the first two warm up
      client.send_chat(id, "stream-" + std::to_string(id));  // a session each, as above
      for (int c = 0; c < kChunksPerAnswer; ++c) {
        stub.release_chunk();
        for (;;) {
          const Value frame = client.read_frame();
          if (frame.at("TYPE").is_keyword("STREAM-CHUNK")) break;
          if (frame.at("TYPE").is_keyword("RESPONSE")) die("the answer ended before its chunks: " + to_sexp(frame));
        }
        const auto read = Clock::now();
        if (id > 2) latency.push_back(std::chrono::duration<double, std::micro>(read - stub.written_at()).count());
      }
      for (;;) {
        const Value frame = client.read_frame();
        if (!frame.at("TYPE").is_keyword("RESPONSE")) continue;
        if (!frame.at("STATUS").is_keyword("OK")) die("the streamed chat failed: " + to_sexp(frame));
        break;
      }
    }
    state.counters["stream_chunk_latency_us"] = percentile(latency, 0.5);
    state.counters["stream_chunk_latency_p99_us"] = percentile(latency, 0.99);
    if (!daemon.stop()) die("the daemon did not stop cleanly:\n" + daemon.log());
  }
}

}  // namespace

BENCHMARK(BM_ProviderOverhead)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Inflight1000)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_StreamChunkLatency)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Consensus3Overhead)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
