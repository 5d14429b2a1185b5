// tessera-shardbench's SVG chart (issue 62 item 8, issue 61 item 3): read back as a viewer would
// lay it out, with text widths estimated at 0.6 em a character (independently of the chart's own
// estimate): every text inside the picture (the title was cut at the right edge), no text over a
// bar, a whisker or another text; a white background, an axis with units, p10-p90 whiskers and
// swatches in the legend.

#include "tools/shardbench/chart.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "tests/tools/small_model.h"

namespace tessera::shardbench {
namespace {

struct Box {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  bool overlaps(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
};

// No std::regex: under the sanitizers' -O2 -Werror GCC 12 warns inside <regex>.
std::string attribute(const std::string& tag, const std::string& name, const std::string& dflt) {
  const std::string key = " " + name + "=\"";
  const size_t at = tag.find(key);
  if (at == std::string::npos) return dflt;
  const size_t from = at + key.size();
  return tag.substr(from, tag.find('"', from) - from);
}

double number(const std::string& tag, const std::string& name) {
  return std::stod(attribute(tag, name, "0"));
}

// The text a viewer shows: inner tags dropped, an entity one character.
std::string shown(const std::string& markup) {
  std::string out;
  for (size_t i = 0; i < markup.size(); ++i) {
    if (markup[i] == '<' || markup[i] == '&') {
      if (markup[i] == '&') out += '&';
      i = markup.find(markup[i] == '<' ? '>' : ';', i);
      if (i == std::string::npos) break;
    } else {
      out += markup[i];
    }
  }
  return out;
}

// Every `<name ...>` tag of `svg`.
std::vector<std::string> tags(const std::string& svg, const std::string& name) {
  std::vector<std::string> out;
  for (size_t at = svg.find("<" + name + " "); at != std::string::npos;
       at = svg.find("<" + name + " ", at + 1)) {
    out.push_back(svg.substr(at, svg.find('>', at) - at + 1));
  }
  return out;
}

struct Text {
  std::string content;
  double font_size = 0;
  Box box;
};

struct Svg {
  double width = 0, height = 0;
  std::vector<std::string> rects, lines;  // their tags
  std::vector<Text> texts;
};

Svg parse(const std::string& svg) {
  Svg out;
  const std::vector<std::string> root = tags(svg, "svg");
  REQUIRE(root.size() == 1);
  out.width = number(root[0], "width");
  out.height = number(root[0], "height");
  out.rects = tags(svg, "rect");
  out.lines = tags(svg, "line");
  for (size_t at = svg.find("<text "); at != std::string::npos; at = svg.find("<text ", at + 1)) {
    const size_t open_end = svg.find('>', at);
    const std::string tag = svg.substr(at, open_end - at + 1);
    Text t;
    t.content = shown(svg.substr(open_end + 1, svg.find("</text>", at) - open_end - 1));
    t.font_size = std::stod(attribute(tag, "font-size", "12"));
    const double w = 0.6 * t.font_size * static_cast<double>(t.content.size());
    const double x = number(tag, "x"), y = number(tag, "y");
    const std::string anchor = attribute(tag, "text-anchor", "start");
    const double x0 = anchor == "middle" ? x - w / 2 : anchor == "end" ? x - w : x;
    t.box = {x0, y - 0.8 * t.font_size, x0 + w, y + 0.2 * t.font_size};
    out.texts.push_back(t);
  }
  return out;
}

Box rect_box(const std::string& tag) {
  const double x = number(tag, "x"), y = number(tag, "y");
  return {x, y, x + number(tag, "width"), y + number(tag, "height")};
}

Box line_box(const std::string& tag) {
  const double x1 = number(tag, "x1"), x2 = number(tag, "x2");
  const double y1 = number(tag, "y1"), y2 = number(tag, "y2");
  const double half = number(tag, "stroke-width") / 2;
  return {std::min(x1, x2) - half, std::min(y1, y2) - half, std::max(x1, x2) + half,
          std::max(y1, y2) + half};
}

StrategyResult result(const std::string& name, double median_s, double p10, double p90,
                      double comm) {
  StrategyResult r;
  r.strategy.name = name;
  // 11 steps: percentile's p10 is the second, its p90 the tenth.
  r.measured.step_s = {p10,      p10,      median_s, median_s, median_s, median_s,
                       median_s, median_s, median_s, p90,      p90};
  r.measured.comm_alone_s = comm;
  r.predicted.compute_s = 0.8 * median_s;
  r.predicted.comm_s = comm * 1.2;
  return r;
}

void check_layout(const std::string& svg) {
  const Svg s = parse(svg);
  INFO(svg);
  REQUIRE(!s.texts.empty());
  // The title: its estimated width fits the picture.
  const Text& title = s.texts.front();
  CHECK_THAT(title.content, Catch::StartsWith("tessera-shardbench: step time"));
  CHECK(title.box.x1 <= s.width);
  std::vector<Box> marks;  // bars, swatches, whiskers, axis: what text must not cover
  for (const std::string& r : s.rects) {
    if (attribute(r, "width", "") != "100%") marks.push_back(rect_box(r));
  }
  for (const std::string& l : s.lines) {
    if (attribute(l, "stroke", "") != "#dddddd") marks.push_back(line_box(l));  // not gridlines
  }
  for (size_t i = 0; i < s.texts.size(); ++i) {
    const Text& t = s.texts[i];
    INFO("text '" << t.content << "' at " << t.box.x0 << ".." << t.box.x1 << " x " << t.box.y0
                  << ".." << t.box.y1 << " in " << s.width << " x " << s.height);
    CHECK(t.box.x0 >= 0.0);
    CHECK(t.box.x1 <= s.width);
    CHECK(t.box.y0 >= 0.0);
    CHECK(t.box.y1 <= s.height);
    for (const Box& b : marks) CHECK_FALSE(t.box.overlaps(b));
    for (size_t j = i + 1; j < s.texts.size(); ++j) CHECK_FALSE(t.box.overlaps(s.texts[j].box));
  }
}

TEST_CASE("the chart fits its text and no text runs into a bar", "[shardbench]") {
  ModelConfig c = small_model("transformer", 2);
  const std::vector<StrategyResult> results{
      result("single", 0.0545, 0.050, 0.061, 0.0), result("DP", 0.0884, 0.080, 0.120, 0.004),
      result("FSDP x TP", 0.0669, 0.060, 0.070, 0.004),
      result("plan configs/<tp&sp>.txt", 0.0100, 0.009, 0.030, 0.001)};
  check_layout(svg(c, results));
  // The title: "... batch 8 x seq 64, voca" at the right edge.
  c.vocab = 2147483647;
  c.batch = 16777216;
  c.hidden = 131072;
  check_layout(svg(c, results));
  // Warnings under the title, wrapped to the width.
  const std::vector<Warning> warnings{
      {"other_processes",
       "other processes took 32% of the CPU time during the run: the step times and their "
       "p10-p90, the calibration and the predictions and ranking made from it are not this "
       "machine's; rerun it idle"},
      {"DP.forward_s", "DP: forward_s 34.20 ms is longer than the whole step, 23.50 ms"}};
  const std::string warned = svg(small_model("mlp", 1), results, warnings);
  check_layout(warned);
  CHECK_THAT(warned, Catch::Contains(">warning: other processes took 32%"));
  // One strategy, and none.
  check_layout(svg(small_model("mlp", 1), {results[0]}));
  check_layout(svg(small_model("mlp", 1), {}));
}

TEST_CASE("the chart has a white background an axis in ms whiskers and legend swatches",
          "[shardbench]") {
  const std::vector<StrategyResult> results{result("single", 0.0545, 0.050, 0.061, 0.0),
                                            result("DP", 0.0884, 0.080, 0.120, 0.004),
                                            result("plan <a&b>", 0.01, 0.01, 0.01, 0.0)};
  const std::string out = svg(small_model("mlp", 1), results);
  const Svg s = parse(out);
  REQUIRE(!s.rects.empty());
  CHECK(attribute(s.rects.front(), "width", "") == "100%");
  CHECK(attribute(s.rects.front(), "fill", "") == "white");
  std::vector<std::string> texts;
  for (const Text& t : s.texts) texts.push_back(t.content);
  CHECK(std::count(texts.begin(), texts.end(), "step time (ms)") == 1);
  // Ticks in ms from 0 to at least the slowest p90, 120 ms.
  std::vector<double> ticks;
  for (const std::string& t : texts) {
    if (!t.empty() && t.find_first_not_of("0123456789.") == std::string::npos) {
      ticks.push_back(std::stod(t));
    }
  }
  REQUIRE(ticks.size() >= 3);
  CHECK(ticks.front() == 0.0);
  CHECK(ticks.back() >= 120.0);
  CHECK(ticks.back() < 240.0);
  // A whisker per strategy: its line from p10 to p90 on the measured bar's middle.
  int whiskers = 0;
  for (const std::string& l : s.lines) {
    const double length = number(l, "x2") - number(l, "x1");
    whiskers += attribute(l, "stroke", "") == "#222" && number(l, "y1") == number(l, "y2") &&
                        length > 0 && length < 300
                    ? 1
                    : 0;
  }
  CHECK(whiskers >= 3);
  // Swatches: a colored box beside each legend entry.
  int swatches = 0;
  for (const std::string& r : s.rects) swatches += attribute(r, "class", "") != "bar" ? 1 : 0;
  CHECK(swatches == 1 + 4);  // the background and four colors
  CHECK(std::count_if(texts.begin(), texts.end(), [](const std::string& t) {
          return t.rfind("measured:", 0) == 0 || t.rfind("predicted:", 0) == 0;
        }) == 4);
  CHECK_THAT(out, Catch::Contains("plan &lt;a&amp;b&gt;"));
}

}  // namespace
}  // namespace tessera::shardbench
