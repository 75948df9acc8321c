// The oneTBB flow-graph peer of `spindle bench engine`: the same four workloads, 2 threads, graph build + run
// (+ teardown) timed together, nanoseconds per node. Built and run by Scripts/bench-engine-peers.sh:
//
//   g++ -std=c++17 -O2 tbb_flow_graph.cpp -o tbb_flow_graph -ltbb
//   ./tbb_flow_graph [--nodes N] [--runs R] [--threads T]
//   ./tbb_flow_graph --once WORKLOAD [--nodes N] [--threads T]
//
// Output, one line per workload (tab-separated): name, nodes, edges, median ns per node, min ns per node.
// With --once, runs that one workload (independent, chain, fan-in or dag) a single time, untimed and silent, for
// Scripts/bench-instructions.sh to count its instructions under callgrind; --nodes may then be 0 (the empty run
// whose count is subtracted).
// The random DAG uses the same generator (splitmix64, seed 2026) as Sources/SpindleBenchmarks, so both sides
// build the same graph; the edge count is printed so the script can check that they agree.
#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/version.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <string>
#include <vector>

namespace {

using Node = tbb::flow::continue_node<tbb::flow::continue_msg>;
using Message = tbb::flow::continue_msg;

// Every body marks its node as run; the marks are checked after each run (not timed), so a graph that was
// built wrong (a node never run) stops the program instead of printing a number.
struct Marks {
  std::vector<unsigned char> ran;
  explicit Marks(std::size_t count) : ran(count, 0) {}
  void check(const char* workload) const {
    std::size_t missing = std::count(ran.begin(), ran.end(), 0);
    if (missing != 0) {
      std::fprintf(stderr, "tbb_flow_graph: %s: %zu of %zu nodes never ran\n", workload, missing, ran.size());
      std::exit(1);
    }
  }
};

// Independent items: N nodes without edges, each started by a message.
void independent(int count, Marks& marks) {
  tbb::flow::graph g;
  std::deque<Node> nodes;
  for (int i = 0; i < count; ++i) {
    nodes.emplace_back(g, [&marks, i](const Message&) { marks.ran[i] = 1; });
  }
  for (auto& node : nodes) node.try_put(Message());
  g.wait_for_all();
}

// A chain: node i runs after node i - 1.
void chain(int count, Marks& marks) {
  tbb::flow::graph g;
  std::deque<Node> nodes;
  for (int i = 0; i < count; ++i) {
    nodes.emplace_back(g, [&marks, i](const Message&) { marks.ran[i] = 1; });
    if (i > 0) tbb::flow::make_edge(nodes[i - 1], nodes[i]);
  }
  nodes.front().try_put(Message());
  g.wait_for_all();
}

// Fan-in: N sources, one sink that runs after all of them.
void fanIn(int count, Marks& marks) {
  tbb::flow::graph g;
  Node sink(g, [&marks, count](const Message&) { marks.ran[count] = 1; });
  std::deque<Node> nodes;
  for (int i = 0; i < count; ++i) {
    nodes.emplace_back(g, [&marks, i](const Message&) { marks.ran[i] = 1; });
    tbb::flow::make_edge(nodes.back(), sink);
  }
  for (auto& node : nodes) node.try_put(Message());
  g.wait_for_all();
}

// The random DAG of Sources/SpindleBenchmarks (RandomGraph): node i depends on up to 4 distinct earlier nodes,
// half of the draws among the 64 previous nodes, half anywhere earlier.
std::vector<std::vector<int>> randomGraph(int count, int edgesPerNode, std::uint64_t seed) {
  std::uint64_t state = seed;
  auto next = [&state]() {
    state += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  std::vector<std::vector<int>> dependencies(count);
  for (int index = 1; index < count; ++index) {
    std::vector<int>& picked = dependencies[index];
    for (int draw = 0; draw < std::min(edgesPerNode, index); ++draw) {
      std::uint64_t window = next() % 2 == 0 ? std::min(index, 64) : index;
      int dependency = index - 1 - static_cast<int>(next() % window);
      if (std::find(picked.begin(), picked.end(), dependency) == picked.end()) picked.push_back(dependency);
    }
    std::sort(picked.begin(), picked.end());
  }
  return dependencies;
}

void dag(const std::vector<std::vector<int>>& dependencies, Marks& marks) {
  tbb::flow::graph g;
  std::deque<Node> nodes;
  const int count = static_cast<int>(dependencies.size());
  for (int i = 0; i < count; ++i) {
    nodes.emplace_back(g, [&marks, i](const Message&) { marks.ran[i] = 1; });
    for (int dependency : dependencies[i]) tbb::flow::make_edge(nodes[dependency], nodes[i]);
  }
  for (int i = 0; i < count; ++i) {
    if (dependencies[i].empty()) nodes[i].try_put(Message());
  }
  g.wait_for_all();
}

struct Result {
  double median;
  double min;
};

// One untimed warm-up run, then `runs` timed ones; seconds per node.
Result measure(int runs, std::size_t markCount, int nodes, const char* name, const std::function<void(Marks&)>& body) {
  std::vector<double> perNode;
  for (int run = -1; run < runs; ++run) {
    Marks marks(markCount);
    auto start = std::chrono::steady_clock::now();
    body(marks);
    auto end = std::chrono::steady_clock::now();
    marks.check(name);
    if (run >= 0) perNode.push_back(std::chrono::duration<double, std::nano>(end - start).count() / nodes);
  }
  std::sort(perNode.begin(), perNode.end());
  std::size_t mid = perNode.size() / 2;
  double median = perNode.size() % 2 == 1 ? perNode[mid] : (perNode[mid - 1] + perNode[mid]) / 2;
  return {median, perNode.front()};
}

int parseCount(const char* flag, const char* text, long least) {
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < least || value > 100000000) {
    std::fprintf(stderr, "tbb_flow_graph: %s needs a whole number from %ld to 100000000, not '%s'\n", flag, least, text);
    std::exit(2);
  }
  return static_cast<int>(value);
}

}  // namespace

int main(int argc, char** argv) {
  int count = 100000;
  int runs = 3;
  int threads = 2;
  std::string once;
  for (int i = 1; i < argc; ++i) {
    std::string argument = argv[i];
    if (argument == "--once" && i + 1 < argc) {
      once = argv[++i];
    } else if ((argument == "--nodes" || argument == "--runs" || argument == "--threads") && i + 1 < argc) {
      // Only --once runs take 0 nodes (checked below, once every argument is known).
      int value = parseCount(argv[i], argv[i + 1], argument == "--nodes" ? 0 : 1);
      ++i;
      if (argument == "--nodes") count = value;
      if (argument == "--runs") runs = value;
      if (argument == "--threads") threads = value;
    } else {
      std::fprintf(stderr,
                   "usage: tbb_flow_graph [--nodes N] [--runs R] [--threads T]\n"
                   "       tbb_flow_graph --once independent|chain|fan-in|dag [--nodes N] [--threads T]\n");
      return 2;
    }
  }
  if (once.empty() && count == 0) {
    std::fprintf(stderr, "tbb_flow_graph: --nodes 0 is only for --once runs\n");
    return 2;
  }
  // The calling thread joins wait_for_all(), so `threads` counts it: 2 means one worker plus the caller.
  tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism, threads);

  if (!once.empty()) {
    // One mark more than nodes: fan-in's sink has the last one; the other workloads set it themselves.
    Marks marks(static_cast<std::size_t>(count) + 1);
    if (once == "fan-in") {
      fanIn(count, marks);
      if (count == 0) marks.ran[0] = 1;  // no sources: nothing sends the sink a message
    } else {
      if (once == "independent") {
        independent(count, marks);
      } else if (once == "chain") {
        if (count > 0) chain(count, marks);
      } else if (once == "dag") {
        dag(randomGraph(count, 4, 2026), marks);
      } else {
        std::fprintf(stderr, "tbb_flow_graph: unknown workload '%s' (independent, chain, fan-in, dag)\n", once.c_str());
        return 2;
      }
      marks.ran[count] = 1;
    }
    marks.check(once.c_str());
    return 0;
  }

  auto graph = randomGraph(count, 4, 2026);
  std::size_t edges = 0;
  for (const auto& dependencies : graph) edges += dependencies.size();

  struct Row {
    const char* name;
    std::size_t edges;
    Result result;
  };
  std::vector<Row> rows;
  rows.push_back({"independent", 0, measure(runs, count, count, "independent", [&](Marks& m) { independent(count, m); })});
  rows.push_back({"chain", static_cast<std::size_t>(count - 1),
                  measure(runs, count, count, "chain", [&](Marks& m) { chain(count, m); })});
  rows.push_back({"fan-in", static_cast<std::size_t>(count),
                  measure(runs, count + 1, count, "fan-in", [&](Marks& m) { fanIn(count, m); })});
  rows.push_back({"dag", edges, measure(runs, count, count, "dag", [&](Marks& m) { dag(graph, m); })});

  std::printf("# oneTBB %d.%d, %d threads, %d nodes, median of %d runs; workload\tnodes\tedges\tns/node\tmin ns/node\n",
              TBB_VERSION_MAJOR, TBB_VERSION_MINOR, threads, count, runs);
  for (const auto& row : rows) {
    std::printf("%s\t%d\t%zu\t%.1f\t%.1f\n", row.name, count, row.edges, row.result.median, row.result.min);
  }
  return 0;
}
