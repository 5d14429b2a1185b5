#include "tools/shardbench/chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <utility>

namespace tessera::shardbench {

namespace {

constexpr double kMargin = 12, kPlotWidth = 480, kBar = 14, kBarGap = 2, kRowGap = 14;
constexpr double kTitleFont = 14, kFont = 12, kSmallFont = 11;
constexpr const char* kCompute = "#4c78a8";
constexpr const char* kComm = "#f58518";
constexpr double kPale = 0.45;  // the predicted bars' opacity
constexpr const char* kWarningColor = "#b00020";

std::string xml_escaped(std::string_view s) {
  std::string out;
  for (const char ch : s) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

std::string text(double x, double y, double font_size, std::string_view s,
                 const char* anchor = "start", const char* fill = "black") {
  return fmt::format(
      "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\" text-anchor=\"{}\" fill=\"{}\">{}</text>\n",
      x, y, font_size, anchor, fill, xml_escaped(s));
}

// `s` in lines no wider than `width` (at word boundaries; a longer word on a line of its own).
std::vector<std::string> wrapped(const std::string& s, double font_size, double width) {
  std::vector<std::string> lines;
  std::istringstream words(s);
  for (std::string word; words >> word;) {
    if (!lines.empty() && text_width(lines.back() + " " + word, font_size) <= width) {
      lines.back() += " " + word;
    } else {
      lines.push_back(word);
    }
  }
  return lines;
}

std::string bar(double x, double y, double width, const char* fill, double opacity) {
  return fmt::format(
      "<rect class=\"bar\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\" "
      "fill-opacity=\"{}\"/>\n",
      x, y, std::max(0.0, width), kBar, fill, opacity);
}

std::string line(double x1, double y1, double x2, double y2, const char* stroke, double width) {
  return fmt::format(
      "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
      "stroke-width=\"{}\"/>\n",
      x1, y1, x2, y2, stroke, width);
}

// The p10-p90 whisker across a bar at `y` (its top): a line with end caps, dark on a white halo
// so that it shows on the dark bar and on the background alike.
std::string whisker(double x1, double x2, double y) {
  const double mid = y + kBar / 2;
  std::string out;
  for (const auto& [stroke, width] : {std::pair{"white", 4.0}, std::pair{"#222", 1.5}}) {
    out += line(x1, mid, x2, mid, stroke, width) + line(x1, mid - 5, x1, mid + 5, stroke, width) +
           line(x2, mid - 5, x2, mid + 5, stroke, width);
  }
  return out;
}

// Ticks at 1, 2 or 5 times a power of ten, about five over [0, longest].
double tick_step(double longest) {
  const double raw = longest / 5;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0}) {
    if (m * power >= raw) return m * power;
  }
  return 10 * power;
}

struct Row {
  std::string name, measured_label, predicted_label;
  double compute = 0, comm = 0, p10 = 0, p90 = 0, predicted_local = 0, predicted_comm = 0;
};

Row row_of(const StrategyResult& r) {
  Row row;
  const double step = median(r.measured.step_s);
  row.name = r.strategy.name;
  // As measured: everything but the collectives (compute and the copies around them), then the
  // collectives' time alone (a replay, so at most the step).
  row.comm = std::clamp(r.measured.comm_alone_s, 0.0, step);
  row.compute = step - row.comm;
  row.p10 = percentile(r.measured.step_s, 0.1);
  row.p90 = percentile(r.measured.step_s, 0.9);
  row.predicted_local = r.predicted.compute_s + r.predicted.local_s;
  row.predicted_comm = r.predicted.comm_s;
  row.measured_label = fmt::format("measured {:.1f} ms", step * 1e3);
  row.predicted_label = fmt::format("predicted {:.1f} ms", r.predicted.step_s() * 1e3);
  return row;
}

// The legend: the measured bar's parts and its whisker in one column, the predicted bar's in the
// next. Returns the SVG and the y below it; `width` is what it needs.
struct Legend {
  std::string svg;
  double width = 0, bottom = 0;
};
Legend legend(double left, double y) {
  struct Item {
    const char* fill;  // nullptr: the whisker
    double opacity;
    const char* label;
  };
  const std::vector<Item> columns[] = {
      {{kCompute, 1.0, "measured: compute (the step without its collectives)"},
       {kComm, 1.0, "measured: the step's collectives replayed alone"},
       {nullptr, 1.0, "p10-p90 of the measured steps"}},
      {{kCompute, kPale, "predicted: compute and copies"},
       {kComm, kPale, "predicted: collectives"}}};
  constexpr double kSwatch = 16, kRow = 20, kColumnGap = 28;
  Legend out;
  double x = left;
  for (const std::vector<Item>& column : columns) {
    double widest = 0, row_y = y;
    for (const Item& item : column) {
      if (item.fill != nullptr) {
        out.svg += fmt::format(
            "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{}\" height=\"12\" fill=\"{}\" "
            "fill-opacity=\"{}\"/>\n",
            x, row_y - 10, kSwatch, item.fill, item.opacity);
      } else {
        out.svg += whisker(x + 1, x + kSwatch - 1, row_y - 11);
      }
      out.svg += text(x + kSwatch + 6, row_y, kSmallFont, item.label);
      widest = std::max(widest, kSwatch + 6 + text_width(item.label, kSmallFont));
      row_y += kRow;
    }
    out.bottom = std::max(out.bottom, row_y - kRow + 6);
    x += widest + kColumnGap;
  }
  out.width = x - kColumnGap - left;
  return out;
}

}  // namespace

double text_width(std::string_view s, double font_size) {
  // Characters, not bytes: UTF-8 continuation bytes are not counted.
  const auto chars = std::count_if(
      s.begin(), s.end(), [](char ch) { return (static_cast<unsigned char>(ch) & 0xC0) != 0x80; });
  return 0.6 * font_size * static_cast<double>(chars);
}

std::string svg(const ModelConfig& c, const std::vector<StrategyResult>& results,
                const std::vector<Warning>& warnings) {
  std::vector<Row> rows;
  for (const StrategyResult& r : results) rows.push_back(row_of(r));
  double longest = 1e-6, names = 0, labels = 0;
  for (const Row& r : rows) {
    longest = std::max({longest, r.compute + r.comm, r.p90, r.predicted_local + r.predicted_comm});
    names = std::max(names, text_width(r.name, kFont));
    labels = std::max({labels, text_width(r.measured_label, kSmallFont),
                       text_width(r.predicted_label, kSmallFont)});
  }
  const double step = tick_step(longest);
  const double axis_end = std::ceil(longest / step - 1e-9) * step;
  const double left = kMargin + names + 12;
  auto px = [&](double s) { return left + s / axis_end * kPlotWidth; };
  const std::string title = "tessera-shardbench: step time per strategy";
  const std::string subtitle = model_text(c);
  // Wide enough for the title lines, a label beside the longest bar (and the last tick's), the
  // legend; the warnings wrap to it.
  const double width = std::ceil(std::max({kMargin + text_width(title, kTitleFont) + kMargin,
                                           kMargin + text_width(subtitle, kFont) + kMargin,
                                           left + kPlotWidth + 6 + labels + kMargin,
                                           kMargin + legend(kMargin, 0).width + kMargin}));
  std::string body;
  body += text(kMargin, 22, kTitleFont, title);
  body += text(kMargin, 40, kFont, subtitle);
  double y = 40;
  for (const Warning& w : warnings) {
    for (const std::string& part : wrapped("warning: " + w.text, kSmallFont, width - 2 * kMargin)) {
      y += 15;
      body += text(kMargin, y, kSmallFont, part, "start", kWarningColor);
    }
  }
  const double top = y + 16, pitch = 2 * kBar + kBarGap + kRowGap;
  const double axis_y = top + pitch * static_cast<double>(rows.size()) - kRowGap / 2;
  for (double t = 0; t <= axis_end + step / 2; t += step) {
    body += line(px(t), top - 6, px(t), axis_y, "#dddddd", 1);
    body += line(px(t), axis_y, px(t), axis_y + 4, "#222", 1);
    body += text(px(t), axis_y + 16, kSmallFont, fmt::format("{:g}", t * 1e3), "middle");
  }
  body += line(left, axis_y, left + kPlotWidth, axis_y, "#222", 1);
  body += text(left + kPlotWidth / 2, axis_y + 32, kFont, "step time (ms)", "middle");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const double bar_y = top + pitch * static_cast<double>(i);
    const double predicted_y = bar_y + kBar + kBarGap;
    body += text(kMargin, predicted_y + 4, kFont, r.name);
    body += bar(left, bar_y, px(r.compute) - left, kCompute, 1.0);
    body += bar(px(r.compute), bar_y, px(r.compute + r.comm) - px(r.compute), kComm, 1.0);
    body += whisker(px(r.p10), px(r.p90), bar_y);
    body +=
        text(px(std::max(r.compute + r.comm, r.p90)) + 6, bar_y + 11, kSmallFont, r.measured_label);
    body += bar(left, predicted_y, px(r.predicted_local) - left, kCompute, kPale);
    body += bar(px(r.predicted_local), predicted_y,
                px(r.predicted_local + r.predicted_comm) - px(r.predicted_local), kComm, kPale);
    body += text(px(r.predicted_local + r.predicted_comm) + 6, predicted_y + 11, kSmallFont,
                 r.predicted_label);
  }
  const Legend key = legend(kMargin, axis_y + 58);
  body += key.svg;
  const double height = std::ceil(key.bottom + kMargin);
  return fmt::format(
             "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
             "font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
             width, height) +
         body + "</svg>\n";
}

}  // namespace tessera::shardbench
