#include "experiments/sweep.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <toml++/toml.h>

#include "core/common/source_tree.h"
#include "core/common/error.h"
#include "core/common/regular_file.h"
#include "core/common/one_line.h"
#include "core/config/config_fields.h"
#include "core/model/config.h"
#include "core/results/csv_reader.h"
#include "core/sim/stack.h"

namespace ptdp {

namespace fs = std::filesystem;

const char* sweep_kind_name(SweepKind k) {
  switch (k) {
    case SweepKind::Train: return "train";
    case SweepKind::Bubble: return "bubble";
    case SweepKind::Eq1: return "eq1";
  }
  return "?";
}

SweepScale parse_sweep_scale(const std::string& s) {
  if (s == "paper") return SweepScale::Paper;
  if (s == "small") return SweepScale::Small;
  usage_error("--scale '{}' must be paper or small", s);
}

std::vector<std::string> spec_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("PTDP_SPEC_DIR"); env && *env) dirs.push_back(env);
  dirs.push_back("experiments/specs");
  if (const fs::path root = source_tree(); !root.empty()) dirs.push_back((root / "experiments" / "specs").string());
  return dirs;
}

const std::vector<std::string>& sweep_names() {
  // The SC'21 paper's, then the other published runs the performance model is checked on.
  static const std::vector<std::string> names = {"table1", "table2", "fig6",  "fig7",  "fig8",  "fig10", "fig11",
                                                 "fig12",  "fig13",  "fig14", "fig15", "fig16", "fig17", "fig18",
                                                 "kor22-table4", "kor22-table5", "mcore-h100", "bloom-176b"};
  return names;
}

const std::vector<std::string>& artefact_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v = sweep_names();
    v.insert(v.end(), {"llama", "llama-data"});
    return v;
  }();
  return names;
}

namespace {

// The keys a settings table may hold (base, small, a series, a point, their small tables): the
// preset, the model's name, the GPUs, and every field of the tables marked for specs.
const std::vector<std::string>& setting_keys() {
  static const std::vector<std::string> k = [] {
    std::vector<std::string> v = {"model", "model_name", "gpus"};
    for (const Field* f : all_fields())
      if (f->spec_key()) v.push_back(f->name());
    return v;
  }();
  return k;
}

bool is_setting(const std::string& k) {
  const auto& ks = setting_keys();
  return std::find(ks.begin(), ks.end(), k) != ks.end();
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

SpecValue value_of(const toml::node& n, const std::string& where, const std::string& key) {
  if (auto v = n.value_exact<int64_t>()) return static_cast<long long>(*v);
  if (auto v = n.value_exact<double>()) return *v;
  if (auto v = n.value_exact<bool>()) return *v;
  if (auto v = n.value_exact<std::string>()) return *v;
  usage_error("{}: key '{}' must be an integer, a number, a boolean or a string", where, one_line(key));
}

// Reads the settings of `t`; keys in `extra` are the caller's (name, x, only, small) and skipped.
SpecSettings read_settings(const toml::table& t, const std::string& where, const std::vector<std::string>& extra) {
  SpecSettings s;
  s.where = where;
  for (const auto& [k, node] : t) {
    const std::string key(k.str());
    if (std::find(extra.begin(), extra.end(), key) != extra.end()) continue;
    if (!is_setting(key))
      usage_error("{}: unknown key '{}' (settings: {})", where, one_line(key), joined(setting_keys()));
    s.values.emplace_back(key, value_of(node, where, key));
  }
  // The preset first: the other keys override its sizes.
  std::stable_partition(s.values.begin(), s.values.end(), [](const auto& kv) { return kv.first == "model"; });
  return s;
}

SpecSettings read_sub_settings(const toml::table& t, const std::string& key, const std::string& where) {
  const toml::node* n = t.get(key);
  if (!n) return SpecSettings{{}, where + "." + key};
  const toml::table* sub = n->as_table();
  if (!sub) usage_error("{}: '{}' must be a table", where, key);
  return read_settings(*sub, where + "." + key, {});
}

std::string text_field(const toml::table& t, const std::string& key, const std::string& where, bool required) {
  const toml::node* n = t.get(key);
  if (!n) {
    if (required) usage_error("{}: missing key '{}'", where, key);
    return "";
  }
  if (auto v = n->value_exact<std::string>()) return *v;
  if (auto v = n->value_exact<int64_t>()) return std::to_string(*v);  // x = 8 reads as "8"
  usage_error("{}: key '{}' must be a string", where, key);
}

// A RunConfig being assembled from settings, with what was given explicitly.
struct Assembly {
  RunConfig cfg;
  int gpus = 0;
  bool pp_given = false, name_given = false, iters_given = false;
};

// t*p*d of a layout the analytic sweeps take without validate_run: at most 2^20 ranks (as
// validate_run allows), computed without overflow.
int ranks_of(const ParallelConfig& p) {
  const int64_t r = int64_t(p.tp) * p.pp * p.dp;
  if (r > (int64_t(1) << 20))
    usage_error("tp {} x pp {} x dp {} = {} ranks, more than 2^20", p.tp, p.pp, p.dp, r);
  return int(r);
}

long long as_int(const SpecValue& v, const std::string& where, const std::string& key) {
  if (const auto* i = std::get_if<long long>(&v)) return *i;
  usage_error("{}: key '{}' must be an integer", where, key);
}
bool as_bool(const SpecValue& v, const std::string& where, const std::string& key) {
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  usage_error("{}: key '{}' must be true or false", where, key);
}
const std::string& as_text(const SpecValue& v, const std::string& where, const std::string& key) {
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  usage_error("{}: key '{}' must be a string", where, key);
}

int as_count(const SpecValue& v, const std::string& where, const std::string& key) {
  const long long i = as_int(v, where, key);
  if (i <= 0 || i > (1 << 30)) usage_error("{}: key '{}' = {} must be an integer from 1 to {}", where, key, i, 1 << 30);
  return static_cast<int>(i);
}

// An enumerated setting named as its flag takes it (UsageError "WHERE: FLAG 'x' must be ...").
template <NamedEnum E>
E as_enum(const SpecValue& v, const std::string& where, const std::string& key, const std::string& flag) {
  try {
    return parse_enum<E>(as_text(v, where, key), flag);
  } catch (const UsageError& e) {
    usage_error("{}: {}", where, one_line(e.what()));
  }
}

// A setting named as a field sets it, by the field's type and rules: integers from 1 (a positive
// field) or 0 to 2^30, "WHERE: key 'zero' = 4 must be 0, 1, 2 or 3".
void set_field(const Field& f, const SpecValue& v, const std::string& where, RunConfig& c) {
  const std::string& key = f.name();
  std::visit(
      [&](const auto& m) {
        using T = typename std::decay_t<decltype(m)>::Type;
        if constexpr (std::is_same_v<T, bool>) {
          m.ref(c) = as_bool(v, where, key);
        } else if constexpr (std::is_integral_v<T>) {
          const long long n = as_int(v, where, key);
          bool positive = false;
          for (const FieldRule& r : f.rules()) positive = positive || (r.lo == 0.0 && r.lo_open);
          const long long lo = positive ? 1 : 0;
          if (n < lo || n > (1 << 30))
            usage_error("{}: key '{}' = {} must be an integer from {} to {}", where, key, n, lo, 1 << 30);
          m.ref(c) = static_cast<T>(n);
          if (const FieldRule* r = f.broken_rule(c)) usage_error("{}: key '{}' = {} {}", where, key, n, r->must);
        } else if constexpr (std::is_same_v<T, std::string>) {
          m.ref(c) = as_text(v, where, key);
        } else if constexpr (NamedEnum<T>) {
          m.ref(c) = as_enum<T>(v, where, key, f.flag());
        } else {
          static_assert(std::is_same_v<T, double>);
          if (const auto* d = std::get_if<double>(&v)) m.ref(c) = *d;
          else m.ref(c) = double(as_int(v, where, key));
        }
      },
      f.access());
}

void apply(Assembly& a, const SpecSettings& s) {
  RunConfig& c = a.cfg;
  for (const auto& [key, v] : s.values) {
    const std::string& w = s.where;
    if (key == "model") {
      try {
        const std::string name = c.model.name;
        c.model = preset_config(as_text(v, w, key));
        if (a.name_given) c.model.name = name;
      } catch (const UsageError& e) {
        usage_error("{}: {}", w, one_line(e.what()));
      }
    } else if (key == "model_name") {
      c.model.name = as_text(v, w, key);
      a.name_given = true;
    } else if (key == "gpus") {
      a.gpus = as_count(v, w, key);
    } else {
      set_field(*find_field(key), v, w, c);
      a.pp_given = a.pp_given || key == "pp";
      a.iters_given = a.iters_given || key == "iters";
    }
  }
}

bool has_key(const SpecSettings& s, const std::string& key) {
  for (const auto& kv : s.values)
    if (kv.first == key) return true;
  return false;
}

}  // namespace

SweepSpec parse_sweep_spec(const std::string& text, const std::string& path) {
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    usage_error("{}:{}:{}: {}", path, e.source().begin.line, e.source().begin.column, one_line(e.description()));
  }
  static const std::vector<std::string> top = {"name",       "title", "kind",  "metric", "paper",   "hardware",
                                               "small_note", "base",  "small", "series", "points"};
  for (const auto& [k, node] : root)
    if (std::find(top.begin(), top.end(), std::string(k.str())) == top.end())
      usage_error("{}: unknown key '{}' (keys: {})", path, one_line(k.str()), joined(top));
  SweepSpec s;
  s.path = path;
  s.name = text_field(root, "name", path, true);
  // The name becomes a file name under --out: one plain component, nothing that leaves it.
  const bool plain = !s.name.empty() && s.name.size() <= 100 && s.name.front() != '.' &&
                     s.name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
                         std::string::npos;
  if (!plain)
    usage_error("{}: name '{}' must be a plain file name (letters, digits, '.', '_', '-'; not starting with '.'; at "
                "most 100 characters): rows and plots are written to --out under it",
                path, one_line(s.name));
  s.title = text_field(root, "title", path, true);
  s.metric = text_field(root, "metric", path, true);
  s.paper = text_field(root, "paper", path, true);
  s.small_note = text_field(root, "small_note", path, false);
  s.hardware = text_field(root, "hardware", path, false);
  const std::string kind = text_field(root, "kind", path, false);
  if (kind.empty() || kind == "train") s.kind = SweepKind::Train;
  else if (kind == "bubble") s.kind = SweepKind::Bubble;
  else if (kind == "eq1") s.kind = SweepKind::Eq1;
  else usage_error("{}: kind '{}' must be train, bubble or eq1", path, one_line(kind));
  if (std::find(sweep_metrics().begin(), sweep_metrics().end(), s.metric) == sweep_metrics().end())
    usage_error("{}: metric '{}' must be one of {}", path, one_line(s.metric), joined(sweep_metrics()));

  for (const char* t : {"base", "small"}) {
    const toml::node* n = root.get(t);
    if (n && !n->as_table()) usage_error("{}: '{}' must be a table ([{}])", path, t, t);
  }
  if (const toml::table* b = root["base"].as_table()) s.base = read_settings(*b, path + ": [base]", {});
  else s.base.where = path + ": [base]";
  if (const toml::table* b = root["small"].as_table()) s.small = read_settings(*b, path + ": [small]", {});
  else s.small.where = path + ": [small]";

  auto tables_of = [&](const char* key) {
    std::vector<const toml::table*> out;
    const toml::node* n = root.get(key);
    if (!n) usage_error("{}: missing [[{}]] (at least one)", path, key);
    const toml::array* arr = n->as_array();
    if (!arr || arr->empty()) usage_error("{}: '{}' must be an array of tables ([[{}]])", path, key, key);
    for (const auto& e : *arr) {
      if (!e.as_table()) usage_error("{}: '{}' must be an array of tables ([[{}]])", path, key, key);
      out.push_back(e.as_table());
    }
    return out;
  };
  const auto pts = tables_of("points");
  for (size_t i = 0; i < pts.size(); ++i) {
    const std::string where = fmt::format("{}: [[points]] #{}", path, i + 1);
    SpecPoint p;
    p.x = text_field(*pts[i], "x", where, true);
    p.settings = read_settings(*pts[i], where, {"x", "small"});
    p.small = read_sub_settings(*pts[i], "small", where);
    for (const auto& q : s.points)
      if (q.x == p.x) usage_error("{}: x '{}' appears twice", where, one_line(p.x));
    s.points.push_back(std::move(p));
  }
  const auto sers = tables_of("series");
  for (size_t i = 0; i < sers.size(); ++i) {
    const std::string where = fmt::format("{}: [[series]] #{}", path, i + 1);
    SpecSeries se;
    se.name = text_field(*sers[i], "name", where, true);
    se.settings = read_settings(*sers[i], where, {"name", "only", "small", "at", "metric"});
    se.metric = text_field(*sers[i], "metric", where, false);
    if (se.metric.empty()) se.metric = s.metric;
    if (std::find(sweep_metrics().begin(), sweep_metrics().end(), se.metric) == sweep_metrics().end())
      usage_error("{}: metric '{}' must be one of {}", where, one_line(se.metric), joined(sweep_metrics()));
    se.small = read_sub_settings(*sers[i], "small", where);
    if (const toml::node* at = sers[i]->get("at")) {
      const toml::table* t = at->as_table();
      if (!t) usage_error("{}: 'at' must be a table of x labels ({{ \"384\" = {{ ... }} }})", where);
      for (const auto& [k, node] : *t) {
        const std::string x(k.str());
        const std::string w = fmt::format("{}.at.\"{}\"", where, one_line(x));
        const toml::table* pt = node.as_table();
        if (!pt) usage_error("{}: must be a table of settings", w);
        if (std::none_of(s.points.begin(), s.points.end(), [&](const SpecPoint& p) { return p.x == x; }))
          usage_error("{}: 'at' names x '{}', which no [[points]] has", where, one_line(x));
        se.at.push_back({x, read_settings(*pt, w, {"small"}), read_sub_settings(*pt, "small", w)});
      }
    }
    if (const toml::node* o = sers[i]->get("only")) {
      const toml::array* arr = o->as_array();
      if (!arr) usage_error("{}: 'only' must be an array of x labels", where);
      for (const auto& e : *arr) {
        std::string x;
        if (auto v = e.value_exact<std::string>()) x = *v;
        else if (auto iv = e.value_exact<int64_t>()) x = std::to_string(*iv);
        else usage_error("{}: 'only' must be an array of x labels", where);
        if (std::none_of(s.points.begin(), s.points.end(), [&](const SpecPoint& p) { return p.x == x; }))
          usage_error("{}: 'only' names x '{}', which no [[points]] has", where, one_line(x));
        se.only.push_back(x);
      }
    }
    for (const auto& q : s.series)
      if (q.name == se.name) usage_error("{}: series '{}' appears twice", where, one_line(se.name));
    s.series.push_back(std::move(se));
  }
  return s;
}

namespace {
bool names_a_path(const std::string& name_or_path) {
  return name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".toml");
}
}  // namespace

std::string find_spec_file(const std::string& name_or_path) {
  if (names_a_path(name_or_path)) return name_or_path;
  for (const auto& d : spec_dirs()) {
    const fs::path p = fs::path(d) / (name_or_path + ".toml");
    if (fs::is_regular_file(p)) return p.string();
  }
  return "";
}

SweepSpec load_sweep_spec(const std::string& name_or_path) {
  const bool is_path = names_a_path(name_or_path);
  const std::string path = find_spec_file(name_or_path);
  if (is_path && !fs::is_regular_file(path)) usage_error("spec {}: no such file", path);
  if (path.empty())
    usage_error("'{}' is not an artefact (known: {}, all) nor a .toml spec file", one_line(name_or_path),
                joined(artefact_names()));
  SweepSpec s = parse_sweep_spec(read_regular_file(path, "spec"), path);
  if (!is_path && s.name != name_or_path)
    usage_error("{}: name '{}' must equal the file's name '{}'", path, one_line(s.name), one_line(name_or_path));
  return s;
}

std::vector<SweepPoint> expand_sweep(const SweepSpec& spec, SweepScale scale) {
  std::vector<SweepPoint> out;
  for (const auto& se : spec.series) {
    for (const auto& pt : spec.points) {
      if (!se.only.empty() && std::find(se.only.begin(), se.only.end(), pt.x) == se.only.end()) continue;
      Assembly a;
      a.cfg.experiment = spec.name;
      a.cfg.par.recompute = Recompute::Full;  // the paper's runs; a spec may say otherwise
      a.cfg.precision = Precision::F16;
      const SpecAt* at = nullptr;
      for (const auto& e : se.at)
        if (e.x == pt.x) at = &e;
      apply(a, spec.base);
      apply(a, se.settings);
      apply(a, pt.settings);
      if (at) apply(a, at->settings);
      if (scale == SweepScale::Small) {
        const std::string paper_name = a.cfg.model.name;
        const int paper_gpus = a.gpus;
        a.name_given = false;
        a.gpus = 0;
        apply(a, spec.small);
        apply(a, se.small);
        apply(a, pt.small);
        if (at) apply(a, at->small);
        // The paper's GPU count holds at small scale unless the small tables change the layout.
        bool relaid = false;
        for (const auto* t : {&spec.small, &se.small, &pt.small, at ? &at->small : &pt.small})
          for (const char* k : {"tp", "pp", "dp"}) relaid = relaid || has_key(*t, k);
        if (a.gpus == 0 && !relaid) a.gpus = paper_gpus;
        // A small copy is another model: its rows must not be taken for the paper-scale ones.
        if (!a.name_given) a.cfg.model.name = paper_name + "-small";
      }
      const std::string where = fmt::format("{}: series '{}', x '{}'", spec.path, one_line(se.name), one_line(pt.x));
      RunConfig& c = a.cfg;
      ParallelConfig& p = c.par;
      if (a.gpus > 0) {
        if (p.dp == 0) usage_error("{}: 'gpus' needs 'dp'", where);
        if (!a.pp_given) {  // products in 64 bits: spec counts go up to 2^30
          if (a.gpus % (int64_t(p.tp) * p.dp) != 0)
            usage_error("{}: gpus {} must be a multiple of tp {} x dp {}", where, a.gpus, p.tp, p.dp);
          p.pp = int(a.gpus / (int64_t(p.tp) * p.dp));
        } else if (int64_t(p.tp) * p.pp * p.dp != a.gpus) {
          usage_error("{}: gpus {} must equal tp {} x pp {} x dp {}", where, a.gpus, p.tp, p.pp, p.dp);
        }
      }
      if (p.dp == 0) p.dp = 1;
      c.backend = c.precision == Precision::F32 ? BackendKind::Cpu : BackendKind::Cuda;
      c.ranks = 0;
      try {
        if (spec.kind == SweepKind::Bubble) {
          c.model.name = "analytic";
          if (p.global_batch <= 0) usage_error("'global_batch' (b') must be given");
          if (p.global_batch % (int64_t(p.micro_batch) * p.dp) != 0)
            usage_error("global_batch {} must be a multiple of micro_batch {} x dp {}", p.global_batch,
                        p.micro_batch, p.dp);
          c.ranks = ranks_of(p);
        } else if (spec.kind == SweepKind::Eq1) {
          // Eq. (1) needs per-layer times only: p need not divide the layers.
          RunConfig one = c;
          one.par.pp = 1;
          one.par.vpp = 1;
          one.par.schedule = ScheduleKind::OneFOneB;
          validate_run(one);
          c.ranks = ranks_of(p);
          if (p.global_batch % (int64_t(p.micro_batch) * p.dp) != 0)
            usage_error("--global-batch {} must be a multiple of --micro-batch {} x --dp {}", p.global_batch,
                        p.micro_batch, p.dp);
        } else {
          validate_run(c);
          sim::checked_stack(c);
        }
      } catch (const UsageError& e) {
        usage_error("{}: {}", where, one_line(e.what()));
      }
      if (!a.iters_given) {  // run-mode defaults: a few iterations at small scale, more on a cluster
        c.iters = scale == SweepScale::Small ? 3 : 30;
        c.warmup = scale == SweepScale::Small ? 1 : 10;
      }
      if (c.warmup >= c.iters) usage_error("{}: warmup {} must be less than iters {}", where, c.warmup, c.iters);
      out.push_back({se.name, pt.x, c});
    }
  }
  if (out.empty()) usage_error("{}: expands to no configuration", spec.path);
  return out;
}

const std::vector<std::string>& sweep_metrics() {
  static const std::vector<std::string> m = {"tflops_per_gpu", "model_tflops_per_gpu", "seq_per_s",
                                             "bubble_fraction", "normalized_throughput", "iter_time_s",
                                             "layer_fwd_ms", "layer_bwd_ms"};
  return m;
}

std::string metric_column(const std::string& metric) {
  if (metric == "normalized_throughput") return "seq_per_s";
  if (metric == "iter_time_s") return "iter_time_ms";
  return metric;
}

double metric_scale(const std::string& metric) { return metric == "iter_time_s" ? 1e-3 : 1.0; }

const std::vector<std::string>& sweep_key_columns() { return config_key_columns(); }

std::string sweep_row_key(const ResultRow& row) {
  return config_key([&](const std::string& c) { return row.get(c); });
}

std::string sweep_row_key(const CsvTable& t, size_t row) {
  return config_key([&](const std::string& c) { return t.text(row, c); });
}

CsvTable read_sweep_keys(const std::string& path, std::vector<std::string> more, bool lock) {
  std::vector<std::string> cols = sweep_key_columns();
  for (const auto& c : more)
    if (std::find(cols.begin(), cols.end(), c) == cols.end()) cols.push_back(c);
  return CsvTable::read(path, cols, lock, config_key_defaults());
}

std::set<std::string> sweep_keys_in_csv(const std::string& path) {
  std::set<std::string> keys;
  std::error_code ec;
  // Absent, or just created by a concurrent writer that has not written its header yet: no rows.
  if (!fs::exists(path, ec) || fs::file_size(path, ec) == 0) return keys;
  const CsvTable t = read_sweep_keys(path);
  for (size_t i = 0; i < t.size(); ++i) keys.insert(sweep_row_key(t, i));
  return keys;
}

void put_sweep_row(const std::string& path, const ResultRow& row, bool replace) {
  std::error_code ec;
  if (fs::exists(path, ec)) check_result_csv(path, "--out");
  // Under the file's lock: another writer's row cannot slip in between the read and the write, so
  // concurrent runs keep one row per configuration. Without `replace`, a row of the same key
  // written meanwhile (by a run that started at the same time) stays and this one is not added.
  update_result_file(path, [&](const std::string& old) {
    if (old.empty()) return result_header_line() + "\n" + row.to_csv_line() + "\n";
    const CsvTable t = read_sweep_keys(path, {}, /*lock=*/false);  // we hold it exclusively
    const std::string key = sweep_row_key(row);
    std::set<int> same;  // file lines (1-based) of rows with the same key
    for (size_t i = 0; i < t.size(); ++i)
      if (sweep_row_key(t, i) == key) same.insert(t.line(i));
    if (!replace && !same.empty()) return old;
    std::istringstream in(old);
    std::string line, content;
    for (int n = 1; std::getline(in, line); ++n)
      if (!same.count(n)) content += line + "\n";
    return content + row.to_csv_line() + "\n";
  });
}

}  // namespace ptdp
