// tessera-shardbench's command line and plan checks before a run (issue 62 item 5): a misspelt
// flag is unknown (not "expects a value"), --list-modules, output paths checked before the run,
// and --ranks that do not divide the batch: DP runs (its uneven shards' all_gather and
// all_to_all_single are replayed), FSDP says why it cannot.

#include "tools/shardbench/options.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tests/tools/small_model.h"

namespace tessera::shardbench {
namespace {

using V = std::vector<std::string>;

TEST_CASE("a misspelt flag is an unknown flag whatever follows it", "[shardbench]") {
  CHECK_THROWS_WITH(
      parse_options(V{"--simualte"}),
      Catch::Contains("unknown flag --simualte") && Catch::Contains("did you mean --simulate?"));
  CHECK_THROWS_WITH(parse_options(V{"--simualte", "--steps", "1"}),
                    Catch::Contains("unknown flag --simualte"));
  CHECK_THROWS_WITH(parse_options(V{"--stesp", "2"}),
                    Catch::Contains("unknown flag --stesp; did you mean --steps?"));
  CHECK_THROWS_WITH(parse_options(V{"--frobnicate", "2"}),
                    Catch::Contains("unknown flag --frobnicate; see --help"));
  CHECK_THROWS_WITH(parse_options(V{"-x"}), Catch::Contains("unknown flag -x"));
  CHECK_THROWS_WITH(parse_options(V{"stray"}), Catch::Contains("unexpected argument 'stray'"));
  CHECK_THROWS_WITH(parse_options(V{"--steps"}), Catch::Contains("--steps expects a value"));
  // The first mistake on the line is the one said.
  CHECK_THROWS_WITH(parse_options(V{"--stesp", "2", "--steps", "x"}),
                    Catch::Contains("unknown flag --stesp"));
  CHECK_THROWS_WITH(parse_options(V{"--steps", "x", "--stesp", "2"}),
                    Catch::Contains("--steps expects an integer, got 'x'"));
  CHECK(parse_options(V{"--steps", "2", "--steps", "3"}).run.steps == 3);
  CHECK_FALSE(parse_options(V{}).ranks_given);
  CHECK(parse_options(V{"--ranks", "2"}).ranks_given);
  const Options o = parse_options(V{"--list-modules", "--simulate", "--no-flash-attention",
                                    "--recompute", "--seq", "128", "-h"});
  CHECK(o.list_modules);
  CHECK(o.simulate);
  CHECK(o.help);
  CHECK(o.sim.recompute);
  CHECK_FALSE(o.sim.flash_attention);
  CHECK(o.sim.seq == 128);
  CHECK(o.model.seq == 128);
}

TEST_CASE("the module list (--list-modules) names the paths a plan can name", "[shardbench]") {
  // The paths, not the weights: a model this wide would need terabytes.
  ModelConfig lm = small_model("transformer", 3);
  lm.vocab = 2147483647;
  lm.hidden = 1 << 16;
  const std::string text = module_list(lm);
  for (const char* line : {"embed", "blocks.*.wq", "blocks.*.up", "head"}) {
    CHECK_THAT(text, Catch::Contains(std::string("\n  ") + line + " "));
  }
  CHECK_THAT(text, Catch::Contains("Linear") && Catch::Contains("Embedding") &&
                       Catch::Contains("--layers 3") && Catch::Contains("colwise"));
  CHECK_THAT(text, !Catch::Contains("blocks.0") && !Catch::Contains("blocks.2"));
  // Every listed path is one check_plan accepts as a plan key (here, as a sequence line).
  const std::string path = "options_test_plan.txt";
  const ModelConfig mlp = small_model("mlp", 1);
  const std::string mlp_text = module_list(mlp);
  CHECK_THAT(mlp_text, Catch::Contains("\n  0  Linear\n  1  GELU\n  2  Linear\n"));
  { std::ofstream(path) << "0 colwise\n2 rowwise\n"; }
  CHECK_NOTHROW(check_plan(plan_from_file(path, 2), mlp));
  std::remove(path.c_str());
}

TEST_CASE("the --json and --svg paths are checked before the run", "[shardbench]") {
  namespace fs = std::filesystem;
  const fs::path folder = fs::temp_directory_path() / "shardbench_options_test";
  fs::create_directories(folder);
  Options o;
  o.json_file = (folder / "out.json").string();
  o.svg_file = (folder / "out.svg").string();
  CHECK_NOTHROW(check_output_paths(o));
  CHECK_FALSE(fs::exists(o.json_file));  // checked, not created
  o.json_file = (folder / "no" / "such" / "out.json").string();
  CHECK_THROWS_WITH(check_output_paths(o), Catch::Contains("--json '" + o.json_file + "'") &&
                                               Catch::Contains("does not exist"));
  o.json_file.clear();
  o.svg_file = folder.string();
  CHECK_THROWS_WITH(check_output_paths(o),
                    Catch::Contains("--svg '" + o.svg_file + "' is a folder"));
  o.simulate = true;  // --simulate writes no chart
  CHECK_NOTHROW(check_output_paths(o));
  fs::remove_all(folder);
}

// Issue 62: --ranks 3 --strategies dp failed as "no timing for collective all_gather": DTensor
// gathers uneven shards with all_gather (a list of outputs) and all_to_all_single, which the
// replay of the step's collectives could not call.
TEST_CASE("3 ranks (--ranks 3): DP on uneven shards runs and FSDP says why it cannot",
          "[shardbench]") {
  ModelConfig c = small_model("transformer", 1);
  c.batch = 8;  // DTensor's Shard(0) over 3 ranks: 3, 3 and 2 sequences (torch.chunk)
  const Strategy dp = strategy_named("dp", 3);
  const Measurement one = measure(strategy_named("single", 3), c, {.steps = 1, .warmup = 0}, {});
  const Measurement m = measure(dp, c, {.steps = 1, .warmup = 0}, {});
  bool all_gather = false;
  for (const CollectiveTotal& t : m.collectives) all_gather = all_gather || t.kind == "all_gather";
  CHECK(all_gather);
  CHECK(m.comm_alone_s > 0.0);
  CHECK(m.losses[0] == Approx(one.losses[0]).epsilon(1e-12));
  CHECK_NOTHROW(check_fits(dp, c));
  CHECK_THROWS_WITH(check_fits(strategy_named("fsdp", 3), c),
                    Catch::Contains("FSDP") && Catch::Contains("3 does not divide 8") &&
                        Catch::Contains("--batch"));
  CHECK_NOTHROW(check_fits(strategy_named("fsdp", 4), c));
  CHECK_NOTHROW(check_fits(strategy_named("fsdp_tp", 4), c));
  const ModelConfig mlp = small_model("mlp", 1);  // 4 sequences x 8 = 32 rows
  CHECK_THROWS_WITH(check_fits(strategy_named("fsdp", 3), mlp),
                    Catch::Contains("32 rows (--batch x --seq)"));
}

}  // namespace
}  // namespace tessera::shardbench
