// Experiment sweeps: one TOML spec per paper artefact (experiments/specs/NAME.toml) expanded into
// the exact configurations of the paper's figure or table (or their small-scale copies), and the
// resume bookkeeping of `ptdp reproduce` (which configurations a result CSV already holds).
#pragma once
#include <map>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "core/results/csv_reader.h"
#include "core/config/results_csv.h"
#include "core/config/run_config.h"

namespace ptdp {

// What a sweep's points are.
enum class SweepKind {
  Train,   // configurations to simulate (performance model) or to train (real core)
  Bubble,  // Fig. 6: the analytic bubble fraction (p-1)/m, nothing to run
  Eq1,     // Fig. 8: the paper's Eq. (1) estimate, (B/(b d) + p - 1) (t_f(b) + t_b(b))
};
enum class SweepScale { Paper, Small };

const char* sweep_kind_name(SweepKind k);
// "paper" | "small"; UsageError naming --scale otherwise.
SweepScale parse_sweep_scale(const std::string& s);

// A value of a spec setting (TOML integer, float, boolean or string).
using SpecValue = std::variant<long long, double, bool, std::string>;
// The settings of one spec table, in file order ("tp" -> 8, "schedule" -> "1f1b", ...).
struct SpecSettings {
  std::vector<std::pair<std::string, SpecValue>> values;
  std::string where;  // "FILE: [base]", for error messages
};

// Settings of one series at one point (`at = { "384" = { ... } }` in a series): what differs per
// (series, x) pair, e.g. the micro-batch of ZeRO-3 at each GPU count in Table 2.
struct SpecAt {
  std::string x;
  SpecSettings settings, small;
};

struct SpecSeries {
  std::string name;                 // as results/paper/figures.csv names the series
  std::vector<std::string> only;    // x labels this series has (empty: every point)
  SpecSettings settings, small;
  std::vector<SpecAt> at;           // per-point settings of this series
  std::string metric;               // the column this series is compared on (default: the spec's)
};
struct SpecPoint {
  std::string x;                    // as results/paper/figures.csv names the point (table1: params_b)
  SpecSettings settings, small;
};

struct SweepSpec {
  std::string name;    // the artefact: table1, fig6, ..., fig18 (also the result file's name)
  std::string title;   // one line: what the paper's artefact shows
  std::string path;    // the spec file
  SweepKind kind = SweepKind::Train;
  std::string metric;  // the column the paper plots: one of sweep_metrics() (normalized_throughput:
                       // seq_per_s over the series' b = 1 point; iter_time_s: iter_time_ms / 1000)
  std::string paper;   // "table1" (results/paper/table1.csv) or the figure in results/paper/figures.csv
  std::string small_note;  // how --scale small differs from the paper's settings
  std::string hardware;    // the profile --mode simulate uses unless --hardware is given (empty: a100-selene)
  SpecSettings base, small;
  std::vector<SpecSeries> series;
  std::vector<SpecPoint> points;
};

// One configuration of a sweep, named the way the paper's data names its point.
struct SweepPoint {
  std::string series, x;
  RunConfig cfg;  // validated (Eq1: validated with one stage, see expand_sweep)
};

// Where specs are looked up: $PTDP_SPEC_DIR, ./experiments/specs, the source tree's experiments/specs.
std::vector<std::string> spec_dirs();
// The spec file `name_or_path` names: a path (with a '/' or ending in .toml) as it is, else
// NAME.toml in the first of spec_dirs() that holds it; empty when no folder does.
std::string find_spec_file(const std::string& name_or_path);
// The artefacts in the paper's order: table1, fig6, fig7, fig8, fig11, ..., fig18, then
// kor22-table4, kor22-table5 (Korthikanti et al. 2022) and mcore-h100 (Megatron-Core on H100).
const std::vector<std::string>& sweep_names();
// Every artefact `ptdp reproduce` takes by name (besides `all`): sweep_names(), then llama and
// llama-data, which have drivers of their own (experiments/reproduce_llama.h, reproduce_llama_data.h).
// The help and the unknown-name error list these.
const std::vector<std::string>& artefact_names();
// Reads a spec: `name_or_path` is a name looked up in spec_dirs() or a .toml file. UsageError
// naming the file (and line, or table and key) for a syntax error, an unknown key, a value of
// the wrong type, or a missing field.
SweepSpec load_sweep_spec(const std::string& name_or_path);
SweepSpec parse_sweep_spec(const std::string& text, const std::string& path);

// The configurations of a spec: every series crossed with every point (a series' `only` list
// restricts its points), settings applied in the order base, series, point, the series' `at` entry
// for the point, then at small scale [small], the series' small, the point's small, the `at`
// entry's small. Each configuration is validated (UsageError
// naming the spec, series and point and the broken rule). Eq1 points keep the paper's p even
// where p does not divide the layers (the estimate needs only per-layer times).
std::vector<SweepPoint> expand_sweep(const SweepSpec& spec, SweepScale scale);

// Metrics a spec (or one of its series) may compare on.
const std::vector<std::string>& sweep_metrics();
// The result column a metric is read from, and the factor to its unit: normalized_throughput is
// seq_per_s (normalised afterwards), iter_time_s is iter_time_ms / 1000; the others are columns.
std::string metric_column(const std::string& metric);
double metric_scale(const std::string& metric);

// The configuration columns that identify a row (resume and --force replace rows by this key).
const std::vector<std::string>& sweep_key_columns();
std::string sweep_row_key(const ResultRow& row);
std::string sweep_row_key(const CsvTable& t, size_t row);
// Reads the key columns (and `more`) of a result CSV; key columns a file written before them
// lacks read as their defaults (config_key_defaults).
CsvTable read_sweep_keys(const std::string& path, std::vector<std::string> more = {}, bool lock = true);
// Keys of the rows of an existing result CSV (empty when there is no file). UsageError naming the
// file for a malformed one.
std::set<std::string> sweep_keys_in_csv(const std::string& path);
// Appends `row` atomically unless a row of its key is there already (another run wrote it since
// this one read the keys); with `replace`, rows of the same key are dropped in the same atomic
// write instead (the file holds either the old rows or the new one, never neither).
void put_sweep_row(const std::string& path, const ResultRow& row, bool replace);

}  // namespace ptdp
