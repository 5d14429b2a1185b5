// The command-line tools under malformed, negative, huge and missing flag values: each must exit
// with status 2 and a message naming the flag (never a signal, an uncaught exception, or a
// "yes" about a result it could not have computed). Rows 9 and 10 of issue 21.

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "tests/robustness/forked_case.h"
#include "tests/tools/run_command.h"

namespace tessera::robustness_test {
namespace {

using Run = test::CommandResult;

Run run_command(const std::string& args) {
  return test::run_command(std::string(TESSERA_EXPLORER) + " " + args + " 2>&1");
}

// The tool must refuse `args` with status 2 and a message holding `fragment`.
void expect_refusal(const std::string& args, const std::string& fragment) {
  expect_success(
      "tessera-redistribute " + args,
      [args, fragment] {
        const Run r = run_command(args);
        if (r.status != 2 || r.output.find(fragment) == std::string::npos ||
            r.output.find("usage:") == std::string::npos) {
          throw std::logic_error("status " + std::to_string(r.status) + ", output:\n" + r.output);
        }
      },
      60);
}

const std::string kSmall = "--mesh 2x2 --shape 8x8 --iters 1";

TEST_CASE("robustness: tessera-redistribute flags", "[robustness][cli]") {
  // Malformed.
  expect_refusal(kSmall + " --from Sx,R --to R,R", "placement Sx");
  expect_refusal(kSmall + " --from S0,R --to R,Q", "unknown placement \"Q\"");
  expect_refusal(kSmall + " --from _S0,R --to R,R", "_S<d>:<split_factor>");
  expect_refusal(kSmall + " --from _S0:x,R --to R,R", "split factor");
  expect_refusal(kSmall + " --from S0,,R --to R,R", "unknown placement \"\"");
  expect_refusal("--mesh 2x2 --shape 8x8 --iters abc", "--iters");
  expect_refusal("--mesh 2xx2 --shape 8x8", "--mesh");
  expect_refusal("--mesh 2x2 --shape 8by8", "--shape");
  expect_refusal(kSmall + " --dtype f8", "unknown dtype");
  expect_refusal(kSmall + " --bogus 1", "unknown flag --bogus");
  // Negative.
  expect_refusal("--mesh -2x2 --shape 8x8", "--mesh");
  expect_refusal("--mesh 2x2 --shape 8x-8", "--shape");
  expect_refusal("--mesh 2x2 --shape 8x8 --iters -3", "--iters");
  expect_refusal(kSmall + " --from _S0:-2,R --to R,R", "split factor");
  expect_refusal("--mesh 0 --shape 8", "--mesh");
  // Huge.
  expect_refusal("--mesh 20000 --shape 8", "--mesh");
  expect_refusal("--mesh 2x2 --shape 1099511627776x1099511627776", "--shape");
  expect_refusal("--mesh 2x2 --shape 99999999999999999999", "--shape");
  expect_refusal("--mesh 2x2 --shape 1048576x1048576", "GiB");
  expect_refusal("--mesh 2x2 --shape 8x8 --iters 99999999999", "--iters");
  expect_refusal(kSmall + " --from S99999999999,R --to R,R", "placement S99999999999");
  // Missing.
  expect_refusal("--mesh", "missing value after --mesh");
  expect_refusal("--mesh 2x2 --shape", "missing value after --shape");
  expect_refusal(kSmall + " --from", "missing value after --from");
  expect_refusal(kSmall + " --from S0", "one placement per mesh dim");
  expect_refusal(kSmall + " --to R", "one placement per mesh dim");
}

TEST_CASE("robustness: tessera-redistribute on uneven Shard to Shard pairs", "[robustness][cli]") {
  // Issue 62's reproductions: the raw-collective baseline once sized buffers from each rank's
  // own shard, and the threads backend refused the unequal sizes.
  for (const std::string args :
       {"--mesh 2 --shape 5x5 --from S0 --to S1", "--mesh 3 --shape 5x5 --from S0 --to S1",
        "--mesh 4 --shape 5x5 --from S0 --to S1", "--mesh 4 --shape 6x5 --from S0 --to S1",
        "--mesh 2x2 --shape 5x7 --from S0,S1 --to S1,S0"}) {
    expect_success(args, [args] {
      const Run r = run_command(args + " --iters 2");
      if (r.status != 0 ||
          r.output.find("result equals the source tensor: yes") == std::string::npos ||
          r.output.find("raw collectives of its steps") == std::string::npos) {
        throw std::logic_error("status " + std::to_string(r.status) + ", output:\n" + r.output);
      }
    });
  }
}

TEST_CASE("robustness: tessera-redistribute placements the tensor cannot take",
          "[robustness][cli]") {
  // Well-formed flags that the library refuses: an Error message and status 1.
  expect_success("S5 of a 2-D tensor", [] {
    const Run r = run_command(kSmall + " --from S5,R --to R,R");
    if (r.status != 1 || r.output.find("tessera-redistribute:") == std::string::npos) {
      throw std::logic_error("status " + std::to_string(r.status) + ", output:\n" + r.output);
    }
  });
  expect_success("--help", [] {
    const Run r = run_command("--help");
    if (r.status != 0 || r.output.find("usage:") == std::string::npos) {
      throw std::logic_error("status " + std::to_string(r.status) + ", output:\n" + r.output);
    }
  });
  // A split factor far above the dim is a valid placement (torch.chunk semantics) and runs.
  expect_success("--from _S0:1000000000,R", [] {
    const Run r = run_command(kSmall + " --from _S0:1000000000,R --to R,S1");
    if (r.status != 0 ||
        r.output.find("result equals the source tensor: yes") == std::string::npos) {
      throw std::logic_error("status " + std::to_string(r.status) + ", output:\n" + r.output);
    }
  });
}

}  // namespace
}  // namespace tessera::robustness_test
