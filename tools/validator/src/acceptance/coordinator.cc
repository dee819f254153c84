// SPDX-License-Identifier: Apache-2.0
// The acceptance exchange over TCP: hello, tasks, results, verdicts.
#include "kuberdma/validator/coordinator.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <thread>

#include "kuberdma/base/json.h"
#include "kuberdma/base/unique_fd.h"
#include "kuberdma/sock/stream.h"

namespace kuberdma::validator::acceptance {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

// One newline-delimited JSON connection.
class Conn {
 public:
  Conn() = default;
  explicit Conn(UniqueFd fd) : fd_(std::move(fd)) {}
  bool valid() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }

  Result<void> Send(const json& j) {
    std::string line = j.dump() + "\n";
    size_t off = 0;
    while (off < line.size()) {
      ssize_t n = ::send(fd_.get(), line.data() + off, line.size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return FailErrno(errno, "send to a peer of the acceptance exchange");
      off += static_cast<size_t>(n);
    }
    return {};
  }

  Result<json> Recv(Clock::time_point deadline) {
    while (buf_.find('\n') == std::string::npos) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return Fail(ErrorCode::kTimeout, "no message before the deadline");
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000))) <= 0) continue;
      char b[65536];
      ssize_t n = ::recv(fd_.get(), b, sizeof b, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Fail(ErrorCode::kIo, "the peer closed the connection");
      buf_.append(b, static_cast<size_t>(n));
    }
    size_t eol = buf_.find('\n');
    json j = ParseUntrustedJson(buf_.substr(0, eol), "acceptance message").value_or(json());
    buf_.erase(0, eol + 1);
    if (!j.is_object()) return Fail(ErrorCode::kInvalidArgument, "not a JSON object");
    return j;
  }

 private:
  UniqueFd fd_;
  std::string buf_;
};

Result<UniqueFd> Listen(int port) {
  auto fd = sock::ListenTcp("", static_cast<uint16_t>(port));  // IPv6 and IPv4
  if (!fd) return Fail(fd.error().Wrap("the acceptance coordinator port"));
  return fd;
}

// Retries until `deadline`: rank 0 may not listen yet when the others start.
Result<Conn> Connect(const std::string& host, int port, Clock::time_point deadline) {
  std::string last = "not tried";
  while (Clock::now() < deadline) {
    auto fd = sock::ConnectTcp(host, static_cast<uint16_t>(port));
    if (fd) return Conn(std::move(*fd));
    last = fd.error().message();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return Fail(ErrorCode::kTimeout, "could not reach the acceptance coordinator at " + host + ":" +
                                       std::to_string(port) + " (" + last + ")");
}

// Reads a peer's message with `parse`; a message of the wrong shape (nlohmann's type errors) is
// an error here, at the wire, never an exception further in.
template <typename T, typename F>
Result<T> FromWire(const json& j, F parse) {
  try {
    return parse(j);
  } catch (const json::exception& e) {
    return Fail(ErrorCode::kInvalidArgument,
                std::string("malformed acceptance message: ") + e.what());
  }
}

std::string IsoNow() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

// How long rank 0 waits for the other pods to arrive (image pulls, scheduling), and for a task.
std::chrono::seconds JoinWait(const Config& c) {
  return std::chrono::seconds(c.join_timeout_s > 0 ? c.join_timeout_s
                                                   : std::max(120, 5 * c.timeout_s));
}
std::chrono::seconds TaskWait(const Config& c) {
  return std::chrono::seconds(std::max(3, c.task_phases) * c.timeout_s + 30);
}

}  // namespace

// ---- Wire forms ----

json ToJson(const Job& j) {
  return {{"tag", j.tag},     {"commId", j.comm_id},  {"nranks", j.nranks},
          {"ranks", j.ranks}, {"devices", j.devices}, {"round", j.round},
          {"a", j.pair.a},    {"b", j.pair.b},        {"rail", j.rail}};
}

Job JobFromJson(const json& j) {
  return {.tag = j.value("tag", ""),
          .comm_id = j.value("commId", ""),
          .nranks = j.value("nranks", 0),
          .ranks = j.value("ranks", std::vector<int>{}),
          .devices = j.value("devices", std::vector<std::string>{}),
          .round = j.value("round", -1),
          .pair = {j.value("a", 0), j.value("b", 0)},
          .rail = j.value("rail", -1)};
}

json ToJson(const TaskResult& r) {
  json jobs = json::array();
  for (const auto& j : r.jobs) {
    jobs.push_back({{"tag", j.tag},
                    {"ok", j.ok},
                    {"timedOut", j.timed_out},
                    {"busbw", j.busbw_gbps},
                    {"algbw", j.algbw_gbps},
                    {"error", j.error}});
  }
  json traffic = json::object();
  for (const auto& [d, t] : r.traffic) traffic[d] = {{"bytes", t.bytes}, {"share", t.share}};
  return {{"jobs", jobs}, {"traffic", traffic}, {"problems", r.problems}};
}

TaskResult TaskResultFromJson(const json& j) {
  TaskResult r;
  for (const auto& x : j.value("jobs", json::array())) {
    r.jobs.push_back({.tag = x.value("tag", ""),
                      .ok = x.value("ok", false),
                      .timed_out = x.value("timedOut", false),
                      .busbw_gbps = x.value("busbw", 0.0),
                      .algbw_gbps = x.value("algbw", 0.0),
                      .error = x.value("error", "")});
  }
  const json traffic = j.value("traffic", json::object());
  for (const auto& [d, t] : traffic.items()) {
    r.traffic[d] = {t.value("bytes", uint64_t{0}), t.value("share", 0.0)};
  }
  r.problems = j.value("problems", std::vector<std::string>{});
  return r;
}

json ToJson(const NodeInfo& n) {
  json hcas = json::array();
  for (const auto& h : n.hcas) {
    hcas.push_back({{"name", h.name}, {"rateGbps", h.rate_gbps}, {"firmware", h.firmware}});
  }
  json cabling = json::array();
  for (const auto& r : n.cabling) {
    cabling.push_back({{"rail", r.rail},
                       {"hca", r.hca},
                       {"netdev", r.netdev},
                       {"neighbor", r.neighbor ? lldp::ToJson(*r.neighbor) : json(nullptr)}});
  }
  return {{"rank", n.rank},       {"name", n.name},
          {"address", n.address}, {"hcas", hcas},
          {"ok", n.ok},           {"problems", n.problems},
          {"cabling", cabling},   {"cablingNote", n.cabling_note}};
}

namespace {

// A peer's cabling: names shown escaped (lldp::ShowText), at most kMaxCablingRails rails.
std::vector<rails::RailNeighbor> CablingFromJson(const json& j) {
  constexpr size_t kMaxCablingRails = 64;
  std::vector<rails::RailNeighbor> out;
  if (!j.is_array()) return out;
  for (const auto& r : j) {
    if (out.size() == kMaxCablingRails || !r.is_object()) break;
    rails::RailNeighbor n{.rail = r.value("rail", 0),
                          .hca = lldp::ShowText(r.value("hca", ""), 64),
                          .netdev = lldp::ShowText(r.value("netdev", ""), 64)};
    if (r.contains("neighbor") && r["neighbor"].is_object())
      n.neighbor = lldp::NeighborFromJson(r["neighbor"]);
    out.push_back(std::move(n));
  }
  return out;
}

}  // namespace

NodeInfo NodeInfoFromJson(const json& j) {
  NodeInfo n{.rank = j.value("rank", -1),
             .name = j.value("name", ""),
             .address = j.value("address", ""),
             .ok = j.value("ok", false),
             .problems = j.value("problems", std::vector<std::string>{}),
             .cabling = CablingFromJson(j.value("cabling", json())),
             .cabling_note = lldp::ShowText(j.value("cablingNote", ""), 512)};
  for (const auto& h : j.value("hcas", json::array())) {
    n.hcas.push_back({h.value("name", ""), h.value("rateGbps", 0.0), h.value("firmware", "")});
  }
  return n;
}

// ---- Jobs ----

std::map<int, Task> RingTasks(const Config& cfg, const std::map<int, NodeInfo>& nodes,
                              const std::vector<int>& participants) {
  std::map<int, Task> out;
  int g = std::max(1, cfg.local_ranks);
  for (size_t i = 0; i < participants.size(); ++i) {
    const NodeInfo& n = nodes.at(participants[i]);
    Job j{.tag = "ring",
          .comm_id = cfg.comm_host + ":" + std::to_string(cfg.nccl_port),
          .nranks = static_cast<int>(participants.size()) * g};
    for (int r = 0; r < g; ++r) j.ranks.push_back(static_cast<int>(i) * g + r);
    for (const auto& h : n.hcas) j.devices.push_back(h.name);
    out[n.rank].jobs.push_back(std::move(j));
  }
  return out;
}

std::map<int, Task> RoundTasks(const Config& cfg, const std::map<int, NodeInfo>& nodes,
                               const Round& round, int r) {
  std::map<int, Task> out;
  for (const auto& [rank, info] : nodes) out[rank];  // everyone hears of the round
  for (const Pair& p : round) {
    const NodeInfo& a = nodes.at(p.a);
    const NodeInfo& b = nodes.at(p.b);
    size_t rails = std::min(a.hcas.size(), b.hcas.size());
    for (size_t k = 0; k < rails; ++k) {
      Job base{.tag = "r" + std::to_string(r + 1) + "-n" + std::to_string(p.a) + "-n" +
                      std::to_string(p.b) + "-rail" + std::to_string(k + 1),
               .comm_id = a.address + ":" +
                          std::to_string(cfg.nccl_port + 16 * (r + 1) + static_cast<int>(k)),
               .nranks = 2,
               .round = r,
               .pair = p,
               .rail = static_cast<int>(k)};
      Job ja = base;
      Job jb = base;
      ja.ranks = {0};
      ja.devices = {a.hcas[k].name};
      jb.ranks = {1};
      jb.devices = {b.hcas[k].name};
      out[p.a].jobs.push_back(std::move(ja));
      out[p.b].jobs.push_back(std::move(jb));
    }
  }
  return out;
}

// ---- The exchange ----

namespace {

struct Session {
  const Config& cfg;
  std::map<int, NodeInfo> nodes;
  std::map<int, Conn> conns;
  std::vector<int> participants;  // arrived with a passing inventory, in rank order
};

// Accepts hellos until every rank arrived or the join wait is over.
Result<void> Gather(Session& s, int lfd) {
  auto deadline = Clock::now() + JoinWait(s.cfg);
  while (static_cast<int>(s.conns.size()) < s.cfg.world && Clock::now() < deadline) {
    pollfd p{lfd, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    Conn c(sock::Accept(lfd));
    if (!c.valid()) continue;
    auto hello = c.Recv(Clock::now() + std::chrono::seconds(10));
    if (!hello || hello->value("type", "") != "hello" || !hello->contains("node")) continue;
    auto parsed = FromWire<NodeInfo>((*hello)["node"], NodeInfoFromJson);
    if (!parsed) continue;
    NodeInfo n = *parsed;
    if (n.rank < 0 || n.rank >= s.cfg.world || s.conns.contains(n.rank)) continue;
    // Where its pair bootstraps listen: the address it reached us from (rank 0's own is the one
    // every pod was given).
    n.address = n.rank == 0 ? s.cfg.comm_host : sock::PeerAddress(c.fd());
    if (!c.Send({{"type", "welcome"}})) continue;
    s.nodes[n.rank] = n;
    s.conns[n.rank] = std::move(c);
  }
  for (int r = 0; r < s.cfg.world; ++r) {
    if (!s.nodes.contains(r)) {
      s.nodes[r] = {.rank = r,
                    .name = "rank " + std::to_string(r),
                    .ok = false,
                    .problems = {"never reached the coordinator at " + s.cfg.comm_host + ":" +
                                 std::to_string(s.cfg.coord_port) + " within " +
                                 std::to_string(JoinWait(s.cfg).count()) + " s"}};
    }
    if (s.nodes[r].ok) s.participants.push_back(r);
  }
  return {};
}

// Sends each participant its task and collects every result (failures as failed jobs).
std::map<int, TaskResult> RunTasks(Session& s, const std::map<int, Task>& tasks) {
  for (const auto& [rank, task] : tasks) {
    json jobs = json::array();
    for (const auto& j : task.jobs) jobs.push_back(ToJson(j));
    if (auto sent = s.conns[rank].Send({{"type", "task"}, {"jobs", jobs}}); !sent) {
      s.nodes[rank].problems.push_back(sent.error().message());
    }
  }
  std::map<int, TaskResult> out;
  auto deadline = Clock::now() + TaskWait(s.cfg);
  for (const auto& [rank, task] : tasks) {
    auto msg = s.conns[rank].Recv(deadline);
    Result<TaskResult> got = Fail(ErrorCode::kInvalidArgument, "answered something else");
    if (msg && msg->value("type", "") == "result" && msg->contains("result")) {
      got = FromWire<TaskResult>((*msg)["result"], TaskResultFromJson);
    }
    if (got) {
      out[rank] = std::move(*got);
      continue;
    }
    TaskResult lost;
    std::string why = msg ? got.error().message() : msg.error().message();
    for (const auto& j : task.jobs)
      lost.jobs.push_back({.tag = j.tag, .error = "no result: " + why});
    out[rank] = lost;
  }
  return out;
}

RingResult FoldRing(Session& s, const std::map<int, TaskResult>& results) {
  RingResult ring{.ran = true,
                  .ok = !s.participants.empty(),
                  .ranks = static_cast<int>(s.participants.size()) * std::max(1, s.cfg.local_ranks),
                  .local_ranks = std::max(1, s.cfg.local_ranks)};
  double busbw = -1;
  for (const auto& [rank, r] : results) {
    ring.traffic[rank] = r.traffic;
    for (const auto& p : r.problems) s.nodes[rank].problems.push_back(p);
    for (const auto& j : r.jobs) {
      if (!j.ok) {
        ring.ok = false;
        ring.problems.push_back(s.nodes[rank].name + ": " + j.error);
        continue;
      }
      // Every node timed the same collective; the slowest rank is its speed.
      if (busbw < 0 || j.busbw_gbps < busbw) {
        busbw = j.busbw_gbps;
        ring.algbw_gbps = j.algbw_gbps;
      }
    }
  }
  ring.busbw_gbps = std::max(0.0, busbw);
  return ring;
}

void FoldRound(const std::map<int, TaskResult>& results, const std::map<int, Task>& tasks, int r,
               std::vector<RailMeasurement>& out) {
  std::map<std::string, RailMeasurement> by_tag;
  for (const auto& [rank, task] : tasks) {
    for (size_t i = 0; i < task.jobs.size(); ++i) {
      const Job& job = task.jobs[i];
      const JobResult* res = i < results.at(rank).jobs.size() ? &results.at(rank).jobs[i] : nullptr;
      auto [it, fresh] = by_tag.try_emplace(
          job.tag, RailMeasurement{.round = r, .pair = job.pair, .rail = job.rail, .ok = true});
      RailMeasurement& m = it->second;
      bool ok = res != nullptr && res->ok;
      double bw = ok ? res->busbw_gbps : 0;
      m.busbw_gbps = fresh ? bw : std::min(m.busbw_gbps, bw);  // both ends timed it
      m.ok = m.ok && ok;
      if (!ok && m.error.empty()) m.error = res != nullptr ? res->error : "no result";
    }
  }
  for (auto& [tag, m] : by_tag) out.push_back(m);
}

void Tell(Session& s, const FleetReport& rep) {
  for (auto& [rank, conn] : s.conns) {
    const NodeVerdict& v = rep.nodes.at(rank);
    json slow = json::array();
    for (const auto& [hca, why] : SlowHcas(rep, rank)) slow.push_back({hca, why});
    (void)conn.Send({{"type", "done"},
                     {"verdict", v.verdict},
                     {"problems", v.problems},
                     {"summary", rep.Summary()},
                     {"slow_hcas", slow}});
  }
}

void RunRounds(Session& s, Inputs& in, bool need_pairs) {
  if (s.cfg.pairs == PairPolicy::kNever || (s.cfg.pairs == PairPolicy::kAuto && !need_pairs))
    return;
  // Every node meets two partners first (the bye rotates); then rounds stop once the slow
  // measurements are explained.
  Localisation loc;
  for (int r = 0; AnotherRound(r, s.participants.size(), s.cfg.max_rounds, loc); ++r) {
    Round round = PairRound(s.participants, r);
    if (round.empty()) break;
    std::map<int, NodeInfo> taking_part;
    for (int rank : s.participants) taking_part[rank] = s.nodes[rank];
    auto tasks = RoundTasks(s.cfg, taking_part, round, r);
    FoldRound(RunTasks(s, tasks), tasks, r, in.measurements);
    in.rounds.push_back(round);
    loc = Localise(in.measurements, s.nodes, s.cfg.thresholds);
  }
}

// Whatever accepted the connection must be rank 0's coordinator, and must take this rank: an
// unrelated server on the port would otherwise hold the pod for the whole run's wait.
Result<void> AwaitWelcome(const Config& cfg, int rank, Conn& c) {
  std::string where = cfg.comm_host + ":" + std::to_string(cfg.coord_port);
  auto got = c.Recv(Clock::now() + std::chrono::seconds(std::max(1, cfg.welcome_timeout_s)));
  if (got && got->value("type", "") == "welcome") return {};
  if (!got && got.error().code() == ErrorCode::kIo) {
    return Fail(ErrorCode::kAlreadyExists,
                "the acceptance coordinator at " + where + " turned rank " + std::to_string(rank) +
                    " away (closed the connection): is another pod running with the same rank, "
                    "or is the rank outside --world-size?");
  }
  return Fail(ErrorCode::kTimeout,
              "what answers at " + where + " is not the acceptance coordinator (" +
                  (got ? std::string("it sent something else") : got.error().message()) +
                  " within " + std::to_string(std::max(1, cfg.welcome_timeout_s)) +
                  " s of the hello): --comm-id must be rank 0's address and the port after it "
                  "must be free for the coordinator");
}

}  // namespace

Result<FleetReport> Coordinate(const Config& cfg, NodeAgent& local) {
  KUBERDMA_ASSIGN_OR_RETURN(UniqueFd lfd, Listen(cfg.coord_port));
  Config self = cfg;
  self.comm_host = "127.0.0.1";
  Result<NodeOutcome> mine = Fail(ErrorCode::kInternal, "not run");
  std::thread own([&] { mine = Participate(self, 0, local); });
  Session s{.cfg = cfg};
  (void)Gather(s, lfd.get());
  Inputs in{.thresholds = cfg.thresholds,
            .baseline = cfg.baseline,
            .nccl_version = cfg.nccl_version,
            .collective = cfg.collective,
            .bytes = cfg.bytes,
            .date = IsoNow(),
            .transport = cfg.transport};
  bool ring_possible = !s.participants.empty() && s.participants.front() == 0;
  // The verbs rail sweep has no ring: its pair rounds are the whole run.
  bool sweep = cfg.transport == "verbs";
  if (ring_possible && !sweep) {
    in.ring = FoldRing(s, RunTasks(s, RingTasks(cfg, s.nodes, s.participants)));
  } else if (!ring_possible) {
    in.ring.problems.emplace_back(
        "rank 0's node did not pass its inventory: it roots every bootstrap");
  }
  std::optional<double> base_ring = cfg.baseline ? cfg.baseline->ring_gbps : std::nullopt;
  if (ring_possible)
    RunRounds(s, in, sweep || RingNeedsPairs(in.ring, s.nodes, cfg.thresholds, base_ring));
  in.nodes = s.nodes;
  FleetReport rep = Evaluate(std::move(in));
  Tell(s, rep);
  own.join();
  return rep;
}

Result<NodeOutcome> Participate(const Config& cfg, int rank, NodeAgent& agent) {
  KUBERDMA_ASSIGN_OR_RETURN(Conn c,
                            Connect(cfg.comm_host, cfg.coord_port, Clock::now() + JoinWait(cfg)));
  NodeInfo me = agent.Describe();
  me.rank = rank;
  KUBERDMA_TRY(c.Send({{"type", "hello"}, {"node", ToJson(me)}}));
  KUBERDMA_TRY(AwaitWelcome(cfg, rank, c));
  // The coordinator may wait for slow pods and run up to four phases: wait as long as it might.
  auto wait = JoinWait(cfg) + (kMaxRounds + 1) * TaskWait(cfg);
  for (;;) {
    KUBERDMA_ASSIGN_OR_RETURN(json msg, c.Recv(Clock::now() + wait));
    std::string type = msg.value("type", "");
    if (type == "done") {
      NodeOutcome out{.verdict = msg.value("verdict", "fail"),
                      .problems = msg.value("problems", std::vector<std::string>{}),
                      .fleet_summary = msg.value("summary", "")};
      for (const auto& x : msg.value("slow_hcas", json::array())) {
        if (x.is_array() && x.size() == 2 && x[0].is_string() && x[1].is_string())
          out.slow_hcas.emplace_back(x[0].get<std::string>(), x[1].get<std::string>());
      }
      return out;
    }
    if (type != "task") continue;
    Task task;
    for (const auto& j : msg.value("jobs", json::array())) {
      KUBERDMA_ASSIGN_OR_RETURN(Job job, FromWire<Job>(j, JobFromJson));
      task.jobs.push_back(std::move(job));
    }
    TaskResult r = task.jobs.empty() ? TaskResult{} : agent.Execute(task);
    KUBERDMA_TRY(c.Send({{"type", "result"}, {"result", ToJson(r)}}));
  }
}

}  // namespace kuberdma::validator::acceptance
