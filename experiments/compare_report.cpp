#include "experiments/compare_report.h"

#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/common/utf8.h"

namespace ptdp {

namespace {

int count(const CompareOutcome& o, const std::string& verdict) {
  int n = 0;
  for (const auto& c : o.configs) n += c.verdict == verdict;
  return n;
}

std::string number(const std::optional<double>& v, const char* fmt_spec = "{:.4g}") {
  return v ? fmt::format(fmt::runtime(fmt_spec), *v) : "-";
}

// XML text and attribute values, well-formed whatever the bytes: the five predefined entities;
// tab and line breaks as character references (an attribute keeps them so, where a raw one would
// be read as a space); the other control characters, not allowed in XML 1.0, as spaces; U+FFFE,
// U+FFFF and bytes that are not UTF-8 as U+FFFD.
std::string xml(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const std::string_view rest = s.substr(i);
    const size_t n = utf8_sequence_length(rest);
    if (n == 0) {
      out += kUtf8Replacement;
      i += utf8_maximal_subpart(rest);
      continue;
    }
    const char32_t c = utf8_first_code_point(rest);
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      case '\t': out += "&#9;"; break;
      case '\n': out += "&#10;"; break;
      case '\r': out += "&#13;"; break;
      default:
        if (c < 0x20) out += ' ';
        else if (c == 0xFFFE || c == 0xFFFF) out += kUtf8Replacement;
        else out.append(rest.substr(0, n));
    }
    i += n;
  }
  return out;
}

// A Markdown table cell: valid UTF-8, no line breaks, pipes escaped, and <, > and & as entities,
// so that a label is shown as written, never read as HTML.
std::string cell(const std::string& text) {
  std::string out;
  for (const char ch : replace_invalid_utf8(text)) {
    switch (ch) {
      case '|': out += "\\|"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '\n': case '\r': out += ' '; break;
      default: out += ch;
    }
  }
  return out;
}

}  // namespace

std::string OverallGeomean::text() const {
  if (!ratio) return "not compared";
  return fmt::format("{:+.2f}% over {} configuration{}", 100 * (*ratio - 1), configurations,
                     configurations == 1 ? "" : "s");
}

int CompareOutcome::exit_code() const {
  if (!failures.empty()) return kCompareFail;
  return count(*this, "INCONCLUSIVE") > 0 ? kCompareInconclusive : kComparePass;
}

std::string CompareOutcome::verdict() const {
  const int e = exit_code();
  return e == kComparePass ? "PASS" : e == kCompareFail ? "FAIL" : "INCONCLUSIVE";
}

std::string render_json(const CompareOutcome& o) {
  using nlohmann::json;
  auto opt = [](const auto& v) { return v ? json(*v) : json(nullptr); };
  json configs = json::array();
  for (const auto& c : o.configs) {
    json metrics = json::array();
    for (const auto& m : c.metrics)
      metrics.push_back({{"metric", m.name},
                         {"verdict", m.verdict},
                         {"baseline_median", opt(m.base)},
                         {"current_median", opt(m.cur)},
                         {"change_pct", opt(m.delta_pct)},
                         {"interval_pct", m.lo_pct ? json::array({*m.lo_pct, *m.hi_pct}) : json(nullptr)},
                         {"p", opt(m.p)},
                         {"runs", {{"baseline", m.n_base}, {"current", m.n_cur}}},
                         {"runs_to_decide", opt(m.runs_to_decide)},
                         {"detail", m.detail}});
    json key = json::object(), machine = json::object();
    for (const auto& [column, value] : c.key) key[column] = value;
    for (const auto& [column, value] : c.machine) machine[column] = value;
    configs.push_back({{"configuration", key},
                       {"machine", c.machine.empty() ? json(nullptr) : machine},
                       {"label", c.label},
                       {"verdict", c.verdict},
                       {"baseline_lines", c.base_lines},
                       {"current_lines", c.cur_lines},
                       {"note", c.note},
                       {"metrics", metrics}});
  }
  json geomeans = json::object();
  for (const auto& g : o.overall_geomean)
    geomeans[g.metric] = {{"ratio", opt(g.ratio)},
                          {"change_pct", g.ratio ? json(100 * (*g.ratio - 1)) : json(nullptr)},
                          {"configurations", g.configurations}};
  const json doc = {{"baseline", o.baseline},
                    {"current", o.current},
                    {"tolerance_pct", o.tolerance},
                    {"alpha", o.alpha},
                    {"per_machine", o.per_machine},
                    {"verdict", o.verdict()},
                    {"exit_code", o.exit_code()},
                    {"counts",
                     {{"ok", count(o, "ok")},
                      {"regressed", count(o, "REGRESSION")},
                      {"inconclusive", count(o, "INCONCLUSIVE")},
                      {"missing", count(o, "MISSING")},
                      {"new", count(o, "NEW")},
                      {"not_compared", count(o, "not compared")}}},
                    {"overall_geomean", geomeans},
                    {"failures", o.failures},
                    {"configurations", configs}};
  // Text from the files (labels, paths) that is not UTF-8 is written with U+FFFD, never refused.
  return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string render_markdown(const CompareOutcome& o) {
  std::string out = fmt::format("### ptdp compare: **{}**\n\nbaseline `{}`, current `{}`, tolerance {}%, significance "
                                "level {}{}\n\n",
                                o.verdict(), replace_invalid_utf8(o.baseline), replace_invalid_utf8(o.current),
                                o.tolerance, o.alpha,
                                o.per_machine ? ", each machine on its own" : "");
  out += "| configuration | metric | baseline | current | change | verdict |\n|---|---|---:|---:|---|---|\n";
  for (const auto& c : o.configs) {
    if (c.metrics.empty()) {
      out += fmt::format("| {} | | | | | {} |\n", cell(c.label), c.verdict);
      continue;
    }
    for (const auto& m : c.metrics)
      out += fmt::format("| {} | {} | {} | {} | {} | {}{} |\n", cell(c.label), m.name, number(m.base), number(m.cur),
                         cell(m.detail), m.verdict,
                         m.runs_to_decide ? fmt::format(" (about {} runs a side would decide)", *m.runs_to_decide) : "");
  }
  for (const auto& g : o.overall_geomean)
    out += fmt::format("| OVERALL_GEOMEAN | {} | | | {} | |\n", g.metric, g.text());
  if (!o.failures.empty()) {
    out += "\n";
    for (const auto& f : o.failures) out += "- FAIL " + cell(f) + "\n";
  }
  return out;
}

// JUnit XML as the Apache Ant junit task writes it, valid under its strict schema (JUnit.xsd;
// experiments/testdata/junit_ant.xsd): a testsuite with name, package, id, timestamp, hostname,
// tests, failures, errors, skipped and time, then properties, the test cases, system-out and
// system-err; each test case with classname, name and time, a failure with its type.
std::string render_junit(const CompareOutcome& o) {
  int tests = 0, failures = 0, skipped = 0;
  std::string cases;
  auto testcase = [&](const std::string& classname, const std::string& name, const std::string& body) {
    cases += fmt::format("    <testcase classname=\"{}\" name=\"{}\" time=\"0\">\n{}    </testcase>\n", xml(classname),
                         xml(name), body);
  };
  for (const auto& c : o.configs) {
    if (c.verdict == "MISSING") {
      ++tests, ++failures;
      testcase(c.label, "configuration",
               fmt::format("      <failure type=\"MISSING\" message=\"missing from the current file (baseline {})\"/>\n",
                           xml(c.base_lines)));
      continue;
    }
    for (const auto& m : c.metrics) {
      ++tests;
      std::string body;
      if (m.verdict == "REGRESSION" || m.verdict == "EMPTY") {
        ++failures;
        body = fmt::format("      <failure type=\"{}\" message=\"{}: {} -&gt; {}: {}\"/>\n", xml(m.verdict), xml(m.verdict),
                           number(m.base), number(m.cur), xml(m.detail));
      } else if (m.verdict == "INCONCLUSIVE" || m.verdict == "not compared") {
        ++skipped;
        body = fmt::format("      <skipped message=\"{}: {}{}\"/>\n", xml(m.verdict), xml(m.detail),
                           m.runs_to_decide ? fmt::format("; about {} runs a side would decide", *m.runs_to_decide) : "");
      }
      testcase(c.label, m.name, body);
    }
  }
  std::string properties = fmt::format(
      "      <property name=\"tolerance_pct\" value=\"{}\"/>\n      <property name=\"alpha\" value=\"{}\"/>\n"
      "      <property name=\"per_machine\" value=\"{}\"/>\n      <property name=\"verdict\" value=\"{}\"/>\n",
      o.tolerance, o.alpha, o.per_machine, o.verdict());
  for (const auto& g : o.overall_geomean)
    properties += fmt::format("      <property name=\"overall_geomean.{}\" value=\"{}\"/>\n", g.metric, xml(g.text()));
  std::string out;
  for (const auto& f : o.failures) out += "FAIL " + xml(f) + "\n";
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"ptdp compare {} {}\" "
      "package=\"ptdp.compare\" id=\"0\" timestamp=\"{}\" hostname=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" "
      "skipped=\"{}\" time=\"{:.3f}\">\n    <properties>\n{}    </properties>\n{}    <system-out>{}{}</system-out>\n"
      "    <system-err></system-err>\n  </testsuite>\n</testsuites>\n",
      xml(o.baseline), xml(o.current), xml(o.timestamp), xml(o.hostname.empty() ? "localhost" : o.hostname), tests,
      failures, skipped, o.seconds, properties, cases, o.verdict() + "\n", out);
}

}  // namespace ptdp
