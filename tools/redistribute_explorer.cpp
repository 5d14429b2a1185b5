// tessera-redistribute: prints the plan of one redistribute (steps, collectives, bytes per rank,
// cost estimate), runs it on the in-process threads backend, checks the result against the
// source, and times it beside the raw collectives of its steps on the same groups and sizes.
//
//   tessera-redistribute --mesh 2x2 --shape 4096x4096 --from S0,R --to R,S1 [--dtype f32]
//                        [--iters 101]
//
// Placements: R, S<d>, P (sum), P<op> (Psum, Pavg, Pmax, Pmin), _S<d>:<split_factor>.

#include <tessera/tessera.h>

#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>

#include "bench/alternating_timing.h"
#include "dtensor/debug/comm_debug_mode.h"
#include "dtensor/debug/raw_collectives.h"
#include "dtensor/debug/visualize_sharding.h"
#include "dtensor/redistribute/plan.h"

namespace ts = tessera;

namespace {

struct Args {
  ts::Shape mesh{2, 2};
  ts::Shape shape{4096, 4096};
  std::string from = "S0,R";
  std::string to = "R,S1";
  ts::DType dtype = ts::kFloat32;
  int iters = 101;
};

[[noreturn]] void usage(const std::string& problem) {
  std::cerr << "tessera-redistribute: " << problem << "\n"
            << "usage: tessera-redistribute --mesh 2x2 --shape 4096x4096 --from S0,R --to R,S1\n"
            << "       [--dtype f32|f64|bf16|f16] [--iters N]\n"
            << "placements: R, S<d>, P or P<op> (Psum Pavg Pmax Pmin), _S<d>:<split_factor>\n";
  std::exit(2);
}

ts::Shape parse_shape(const std::string& s) {
  ts::Shape out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t x = s.find('x', start);
    const std::string part =
        s.substr(start, x == std::string::npos ? std::string::npos : x - start);
    if (part.empty()) usage("bad shape \"" + s + "\"");
    out.push_back(std::stoll(part));
    if (x == std::string::npos) break;
    start = x + 1;
  }
  return out;
}

ts::Placement parse_placement(const std::string& p) {
  if (p == "R") return ts::Replicate();
  if (p == "P" || p == "Psum") return ts::Partial(ts::dist::ReduceOp::Sum);
  if (p == "Pavg") return ts::Partial(ts::dist::ReduceOp::Avg);
  if (p == "Pmax") return ts::Partial(ts::dist::ReduceOp::Max);
  if (p == "Pmin") return ts::Partial(ts::dist::ReduceOp::Min);
  if (p.size() > 1 && p[0] == 'S') return ts::Shard(std::stoll(p.substr(1)));
  if (p.rfind("_S", 0) == 0) {
    const size_t colon = p.find(':');
    if (colon == std::string::npos) usage("StridedShard needs _S<d>:<split_factor>, got " + p);
    return ts::StridedShard(std::stoll(p.substr(2, colon - 2)), std::stoll(p.substr(colon + 1)));
  }
  usage("unknown placement \"" + p + "\"");
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
  usage("unknown dtype \"" + s + "\"");
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") usage("help");
    if (i + 1 >= argc) usage("missing value after " + flag);
    const std::string v = argv[++i];
    if (flag == "--mesh") {
      a.mesh = parse_shape(v);
    } else if (flag == "--shape") {
      a.shape = parse_shape(v);
    } else if (flag == "--from") {
      a.from = v;
    } else if (flag == "--to") {
      a.to = v;
    } else if (flag == "--dtype") {
      a.dtype = parse_dtype(v);
    } else if (flag == "--iters") {
      a.iters = std::stoi(v);
    } else {
      usage("unknown flag " + flag);
    }
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  const ts::Placements src = parse_placements(args.from);
  const ts::Placements dst = parse_placements(args.to);
  const int world_size = static_cast<int>(args.mesh.numel());
  std::mutex print_mutex;
  int status = 0;
  try {
    ts::dist::run_threads(world_size, [&](ts::dist::ProcessGroupPtr world) {
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
      const int64_t bytes = args.shape.numel() * static_cast<int64_t>(ts::element_size(args.dtype));
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
      std::cout << fmt::format("collectives issued: {}    result equals the source tensor: {}\n",
                               collectives, correct ? "yes" : "NO");
      std::cout << fmt::format(
          "time: redistribute {:.3f} ms, raw collectives of its steps {:.3f} ms -> {:.2f}x "
          "(medians of {} alternating rounds)\n",
          timing.op_s * 1e3, timing.reference_s * 1e3, timing.ratio, args.iters);
      if (!correct) status = 1;
    });
  } catch (const std::exception& e) {
    std::cerr << "tessera-redistribute: " << e.what() << "\n";
    return 1;
  }
  return status;
}
