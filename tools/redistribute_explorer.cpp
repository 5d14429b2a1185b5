// tessera-redistribute: prints the plan of one redistribute (steps, collectives, bytes per rank,
// cost estimate), runs it on the in-process threads backend, checks the result against the
// source, and times it beside the raw collectives of its steps on the same groups and sizes.
//
//   tessera-redistribute --mesh 2x2 --shape 4096x4096 --from S0,R --to R,S1 [--dtype f32]
//                        [--iters 101]
//
// Placements: R, S<d>, P (sum), P<op> (Psum, Pavg, Pmax, Pmin), _S<d>:<split_factor>.

#include <tessera/tessera.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <functional>
#include <iostream>
#include <limits>
#include <mutex>
#include <string>

#include "bench/alternating_timing.h"
#include "tessera/dtensor/debug/comm_debug_mode.h"
#include "tessera/dtensor/debug/raw_collectives.h"
#include "tessera/dtensor/debug/visualize_sharding.h"
#include "tessera/dtensor/redistribute/plan.h"
#include "tools/launch.h"

namespace ts = tessera;

namespace {

struct Args {
  ts::Shape mesh{2, 2};
  ts::Shape shape{4096, 4096};
  std::string from = "S0,R";
  std::string to = "R,S1";
  ts::DType dtype = ts::kFloat32;
  int iters = 101;
  bool help = false;
};

// A mistake in the command line: main prints it above the usage and exits 2.
struct UsageError {
  std::string problem;
};

[[noreturn]] void refuse(const std::string& problem) { throw UsageError{problem}; }

void print_usage(std::ostream& out, const std::string& problem) {
  out << "tessera-redistribute: " << problem << "\n"
      << "usage: tessera-redistribute --mesh 2x2 --shape 4096x4096 --from S0,R --to R,S1\n"
      << "       [--dtype f32|f64|bf16|f16] [--iters N]\n"
      << "placements: R, S<d>, P or P<op> (Psum Pavg Pmax Pmin), _S<d>:<split_factor>\n";
}

// The whole of `s` as an integer in [lo, hi], or a UsageError naming `what`.
int64_t parse_int(const std::string& s, const std::string& what, int64_t lo, int64_t hi) {
  int64_t v = 0;
  const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || error != std::errc() || end != s.data() + s.size() || v < lo || v > hi) {
    refuse(fmt::format("{}: expected an integer in [{}, {}], got \"{}\"", what, lo, hi, s));
  }
  return v;
}

// "4096x4096": sizes of at least `min_size` whose product int64 can count.
ts::Shape parse_shape(const std::string& s, const std::string& flag, int64_t min_size) {
  ts::Shape out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t x = s.find('x', start);
    const std::string part =
        s.substr(start, x == std::string::npos ? std::string::npos : x - start);
    out.push_back(parse_int(part, flag + " \"" + s + "\" size", min_size,
                            std::numeric_limits<int64_t>::max()));
    if (x == std::string::npos) break;
    start = x + 1;
  }
  try {
    ts::checked_numel(out, flag.c_str());
  } catch (const ts::Error& e) {
    refuse(e.what());
  }
  return out;
}

ts::Placement parse_placement(const std::string& p) {
  if (p == "R") return ts::Replicate();
  if (p == "P" || p == "Psum") return ts::Partial(ts::dist::ReduceOp::Sum);
  if (p == "Pavg") return ts::Partial(ts::dist::ReduceOp::Avg);
  if (p == "Pmax") return ts::Partial(ts::dist::ReduceOp::Max);
  if (p == "Pmin") return ts::Partial(ts::dist::ReduceOp::Min);
  constexpr int64_t kMaxDim = 64;
  if (p.size() > 1 && p[0] == 'S') {
    return ts::Shard(parse_int(p.substr(1), "placement " + p + " dim", -kMaxDim, kMaxDim));
  }
  if (p.rfind("_S", 0) == 0) {
    const size_t colon = p.find(':');
    if (colon == std::string::npos) refuse("StridedShard needs _S<d>:<split_factor>, got " + p);
    return ts::StridedShard(
        parse_int(p.substr(2, colon - 2), "placement " + p + " dim", -kMaxDim, kMaxDim),
        parse_int(p.substr(colon + 1), "placement " + p + " split factor", 1,
                  std::numeric_limits<int64_t>::max()));
  }
  refuse("unknown placement \"" + p + "\"");
}

ts::Placements parse_placements(const std::string& s) {
  ts::Placements out;
  size_t start = 0;
  while (true) {
    const size_t comma = s.find(',', start);
    out.push_back(
        parse_placement(s.substr(start, comma == std::string::npos ? comma : comma - start)));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

ts::DType parse_dtype(const std::string& s) {
  if (s == "f32") return ts::kFloat32;
  if (s == "f64") return ts::kFloat64;
  if (s == "bf16") return ts::kBFloat16;
  if (s == "f16") return ts::kFloat16;
  refuse("unknown dtype \"" + s + "\"");
}

// Every rank thread holds the source tensor, its shard and the result (about three copies, and
// the threads share one machine): refuse up front what cannot fit instead of exhausting memory.
void check_fits_in_memory(const Args& a) {
  constexpr int64_t kMaxRanks = 4096;
  if (a.mesh.numel() > kMaxRanks) {
    refuse(fmt::format("--mesh {} has {} ranks; the threads backend runs at most {} rank threads",
                       a.mesh, a.mesh.numel(), kMaxRanks));
  }
  const double bytes = static_cast<double>(a.shape.numel()) *
                       static_cast<double>(ts::element_size(a.dtype)) * 3.0 *
                       static_cast<double>(a.mesh.numel());
  const double physical =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (bytes > physical) {
    refuse(fmt::format(
        "--shape {} {} on {} rank threads needs about {:.1f} GiB (three copies per "
        "rank); this machine has {:.1f} GiB",
        a.shape, ts::dtype_name(a.dtype), a.mesh.numel(), bytes / (1 << 30), physical / (1 << 30)));
  }
}

// The first argument CLI11 did not take (it keeps them in order): an unknown flag or a stray word.
void refuse_unknown(const std::vector<std::string>& unknown) {
  if (unknown.empty()) return;
  const std::string& arg = unknown.front();
  refuse(arg.rfind('-', 0) == 0 ? "unknown flag " + arg : "unexpected argument '" + arg + "'");
}

Args parse(int argc, char** argv) {
  Args a;
  CLI::App app("tessera-redistribute");
  // The usage text is print_usage's, and the arguments CLI11 does not know are named here,
  // instead of in its ExtrasError's words.
  app.set_help_flag();
  app.allow_extras();
  // Set, and its value checked, when CLI11 reaches it: the first mistake on the line is the one
  // said (an unknown flag before it still comes first, below), and a repeated flag's last value
  // wins.
  const auto flag = [&app](const char* name, std::function<void(const std::string&)> set) {
    app.add_option_function<std::string>(name, std::move(set))->trigger_on_parse();
  };
  flag("--mesh", [&a](const std::string& v) { a.mesh = parse_shape(v, "--mesh", 1); });
  flag("--shape", [&a](const std::string& v) { a.shape = parse_shape(v, "--shape", 0); });
  flag("--from", [&a](const std::string& v) { a.from = v; });
  flag("--to", [&a](const std::string& v) { a.to = v; });
  flag("--dtype", [&a](const std::string& v) { a.dtype = parse_dtype(v); });
  flag("--iters", [&a](const std::string& v) {
    a.iters = static_cast<int>(parse_int(v, "--iters", 1, 1000000));
  });
  app.add_flag("-h,--help", a.help);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ArgumentMismatch&) {
    refuse_unknown(app.remaining());
    // CLI11 runs out of values only at the end of the line: the last argument is the flag
    // ("--mesh" or "--mesh=").
    const std::string flag_given = argv[argc - 1];
    refuse("missing value after " + flag_given.substr(0, flag_given.find('=')));
  } catch (const CLI::ParseError& e) {
    refuse_unknown(app.remaining());
    refuse(e.what());
  } catch (const UsageError&) {
    refuse_unknown(app.remaining());
    throw;
  }
  refuse_unknown(app.remaining());
  if (!a.help) check_fits_in_memory(a);
  return a;
}

// The tool, once its command line is read; a mistake in it raises UsageError.
int explore(int argc, char** argv) {
  const Args args = parse(argc, argv);
  if (args.help) {
    print_usage(std::cout, "plans, checks and times one redistribute");
    return 0;
  }
  const ts::Placements src = parse_placements(args.from);
  const ts::Placements dst = parse_placements(args.to);
  if (src.size() != args.mesh.size() || dst.size() != args.mesh.size()) {
    refuse(
        fmt::format("--from and --to need one placement per mesh dim ({} for --mesh {}), got {} "
                    "and {}",
                    args.mesh.size(), args.mesh, src.size(), dst.size()));
  }
  const int world_size = static_cast<int>(args.mesh.numel());
  std::mutex print_mutex;
  int status = 0;
  try {
    ts::dist::run_threads(
        world_size,
        [&](ts::dist::ProcessGroupPtr world) {
          ts::set_num_threads(1);
          const ts::DeviceMesh mesh(ts::DeviceType::CPU, args.mesh);
          const bool lead = world->rank() == 0;
          ts::Generator gen(42);
          const ts::Tensor global = ts::rand(args.shape, args.dtype, &gen);
          const ts::DTensor x = ts::distribute_tensor(global, mesh, src);
          const ts::dtensor::RedistributePlan& plan = ts::dtensor::plan_redistribute(x.spec(), [&] {
            return ts::dtensor::normalize_placements("tessera-redistribute", dst, mesh,
                                                     static_cast<int64_t>(args.shape.size()));
          }());
          ts::DTensor y;
          int64_t collectives = 0;
          {
            ts::debug::CommDebugMode mode;
            y = x.redistribute(dst);
            collectives = mode.get_total_counts();
          }
          const bool correct = ts::equal(y.full_tensor(), global);
          const ts::bench::PairTiming timing = ts::bench::time_alternating(
              world, [&] { x.redistribute(dst); }, ts::debug::raw_collectives(x.spec(), plan),
              args.iters);
          if (!lead) return;
          std::lock_guard<std::mutex> lock(print_mutex);
          const int64_t bytes =
              args.shape.numel() * static_cast<int64_t>(ts::element_size(args.dtype));
          std::cout << fmt::format(
              "redistribute {} -> {} of {} {} ({:.1f} MiB) on mesh {} ({} ranks, "
              "threads backend)\n\n",
              ts::to_string(src), ts::to_string(dst), args.shape, args.dtype,
              static_cast<double>(bytes) / (1 << 20), args.mesh, world_size);
          std::cout << "plan:\n" << plan.to_string() << "\n\n";
          if (args.shape.size() <= 2) {
            ts::debug::visualize_sharding(x, "source:");
            std::cout << "\n";
            ts::debug::visualize_sharding(y, "target:");
            std::cout << "\n";
          }
          std::cout << fmt::format(
              "collectives issued: {}    result equals the source tensor: {}\n", collectives,
              correct ? "yes" : "NO");
          std::cout << fmt::format(
              "time: redistribute {:.3f} ms, raw collectives of its steps {:.3f} ms -> {:.2f}x "
              "(medians of {} alternating rounds)\n",
              timing.op_s * 1e3, timing.reference_s * 1e3, timing.ratio, args.iters);
          if (!correct) status = 1;
        },
        ts::tools::rank_threads_options());
  } catch (const std::exception& e) {
    std::cerr << "tessera-redistribute: " << e.what() << "\n";
    return 1;
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  if (!ts::tools::runs_in_this_process("tessera-redistribute")) return 0;
  try {
    return explore(argc, argv);
  } catch (const UsageError& e) {
    print_usage(std::cerr, e.problem);
    return 2;
  }
}
