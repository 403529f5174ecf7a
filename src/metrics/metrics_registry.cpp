#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <mutex>

#include "core/check.h"
#include "detinfer/metrics.h"
#include "metrics/metric_cells.h"
#include "metrics/prometheus_text.h"

namespace detinfer {

using metrics::CounterCell;
using metrics::GaugeCell;
using metrics::HistogramCell;

// --- handles ------------------------------------------------------------------------
void Counter::inc(std::uint64_t n) const {
  if (cell_ != nullptr) cell_->value.fetch_add(n, std::memory_order_relaxed);
}
std::uint64_t Counter::value() const {
  return cell_ != nullptr ? cell_->value.load(std::memory_order_relaxed) : 0;
}

void Gauge::set(double v) const {
  if (cell_ != nullptr) cell_->value.store(v);
}
void Gauge::add(double delta) const {
  if (cell_ != nullptr) cell_->value.add(delta);
}
double Gauge::value() const { return cell_ != nullptr ? cell_->value.load() : 0.0; }

void Histogram::observe(double v) const {
  if (cell_ == nullptr) return;
  // First bound >= v; NaN lands in +Inf (it compares false with every bound).
  const auto& b = cell_->bounds;
  const std::size_t i =
      std::isnan(v) ? b.size()
                    : static_cast<std::size_t>(std::lower_bound(b.begin(), b.end(), v) - b.begin());
  cell_->counts[i].fetch_add(1, std::memory_order_relaxed);
  cell_->count.fetch_add(1, std::memory_order_relaxed);
  cell_->sum.add(v);
}
std::uint64_t Histogram::count() const {
  return cell_ != nullptr ? cell_->count.load(std::memory_order_relaxed) : 0;
}
double Histogram::sum() const { return cell_ != nullptr ? cell_->sum.load() : 0.0; }
std::vector<std::uint64_t> Histogram::bucket_counts() const {
  std::vector<std::uint64_t> out;
  if (cell_ == nullptr) return out;
  for (std::size_t i = 0; i <= cell_->bounds.size(); ++i) {
    out.push_back(cell_->counts[i].load(std::memory_order_relaxed));
  }
  return out;
}

// --- registry -----------------------------------------------------------------------
namespace {
enum class Kind { kCounter, kGauge, kHistogram };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kCounter:
      return "counter";
    case Kind::kGauge:
      return "gauge";
    case Kind::kHistogram:
      return "histogram";
  }
  return "untyped";
}

struct Series {
  MetricLabels labels;
  std::unique_ptr<CounterCell> counter;
  std::unique_ptr<GaugeCell> gauge;
  std::unique_ptr<HistogramCell> histogram;
};

struct Family {
  Kind kind = Kind::kCounter;
  std::string help;
  std::vector<std::string> label_names;
  std::vector<double> buckets;
  std::deque<Series> series;  // registration order; deque keeps addresses stable
};

std::vector<std::string> names_of(const MetricLabels& labels) {
  std::vector<std::string> names;
  for (const auto& l : labels) names.push_back(l.first);
  return names;
}
}  // namespace

struct MetricsRegistry::Impl {
  mutable std::mutex mu;
  std::map<std::string, Family> families;  // sorted by name: render order

  Series& find_or_add(const std::string& name, const std::string& help, Kind kind,
                      const MetricLabels& labels, const std::vector<double>& buckets) {
    if (!metrics::valid_metric_name(name)) {
      fail(ErrorCode::kInvalidArgument, "metric name '", name,
           "' is invalid (must match [a-zA-Z_:][a-zA-Z0-9_:]*)");
    }
    for (const auto& [label, value] : labels) {
      if (!metrics::valid_label_name(label) || (kind == Kind::kHistogram && label == "le")) {
        fail(ErrorCode::kInvalidArgument, "metric ", name, ": label name '", label,
             "' is invalid (must match [a-zA-Z_][a-zA-Z0-9_]*, not start with __, "
             "and not be 'le' on a histogram)");
      }
    }
    for (std::size_t i = 0; i < buckets.size(); ++i) {
      if (!std::isfinite(buckets[i]) || (i > 0 && !(buckets[i] > buckets[i - 1]))) {
        fail(ErrorCode::kInvalidArgument, "metric ", name, ": bucket ", i, " (", buckets[i],
             ") must be finite and greater than the previous bound");
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    auto [it, inserted] = families.try_emplace(name);
    Family& f = it->second;
    if (inserted) {
      f.kind = kind;
      f.help = help;
      f.label_names = names_of(labels);
      f.buckets = buckets;
    } else if (f.kind != kind || f.help != help || f.label_names != names_of(labels) ||
               f.buckets != buckets) {
      fail(ErrorCode::kInvalidArgument, "metric ", name, " is already registered as a ",
           kind_name(f.kind), " with other help text, label names or buckets");
    }
    for (Series& s : f.series) {
      if (s.labels == labels) return s;
    }
    Series& s = f.series.emplace_back();
    s.labels = labels;
    switch (kind) {
      case Kind::kCounter:
        s.counter = std::make_unique<CounterCell>();
        break;
      case Kind::kGauge:
        s.gauge = std::make_unique<GaugeCell>();
        break;
      case Kind::kHistogram:
        s.histogram = std::make_unique<HistogramCell>(buckets);
        break;
    }
    return s;
  }
};

MetricsRegistry::MetricsRegistry() : impl_(std::make_unique<Impl>()) {}
MetricsRegistry::~MetricsRegistry() = default;

Counter MetricsRegistry::counter(const std::string& name, const std::string& help,
                                 const MetricLabels& labels) {
  return Counter(impl_->find_or_add(name, help, Kind::kCounter, labels, {}).counter.get());
}

Gauge MetricsRegistry::gauge(const std::string& name, const std::string& help,
                             const MetricLabels& labels) {
  return Gauge(impl_->find_or_add(name, help, Kind::kGauge, labels, {}).gauge.get());
}

Histogram MetricsRegistry::histogram(const std::string& name, const std::string& help,
                                     const std::vector<double>& buckets,
                                     const MetricLabels& labels) {
  return Histogram(
      impl_->find_or_add(name, help, Kind::kHistogram, labels, buckets).histogram.get());
}

const char* MetricsRegistry::content_type() { return "text/plain; version=0.0.4; charset=utf-8"; }

std::string MetricsRegistry::render() const {
  using metrics::format_labels;
  using metrics::format_value;
  std::string out;
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (const auto& [name, f] : impl_->families) {
    out += "# HELP " + name + " " + metrics::escape_help(f.help) + "\n";
    out += "# TYPE " + name + " " + kind_name(f.kind) + "\n";
    for (const Series& s : f.series) {
      if (f.kind == Kind::kCounter) {
        out += name + format_labels(s.labels) + " " +
               std::to_string(s.counter->value.load(std::memory_order_relaxed)) + "\n";
      } else if (f.kind == Kind::kGauge) {
        out += name + format_labels(s.labels) + " " + format_value(s.gauge->value.load()) + "\n";
      } else {
        const HistogramCell& h = *s.histogram;
        // Read the buckets first and derive _count from them, so that a scrape racing
        // observe() still has cumulative buckets whose +Inf equals _count.
        std::uint64_t cumulative = 0;
        for (std::size_t i = 0; i <= h.bounds.size(); ++i) {
          cumulative += h.counts[i].load(std::memory_order_relaxed);
          const std::string le = i < h.bounds.size() ? format_value(h.bounds[i]) : "+Inf";
          out += name + "_bucket" + format_labels(s.labels, "le", le) + " " +
                 std::to_string(cumulative) + "\n";
        }
        out += name + "_sum" + format_labels(s.labels) + " " + format_value(h.sum.load()) + "\n";
        out += name + "_count" + format_labels(s.labels) + " " + std::to_string(cumulative) + "\n";
      }
    }
  }
  return out;
}

}  // namespace detinfer
