// Pieces of the Prometheus text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/).
#pragma once

#include <string>
#include <string_view>

#include "detinfer/metrics.h"

namespace detinfer::metrics {

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool valid_metric_name(std::string_view name);
// [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__" (reserved).
bool valid_label_name(std::string_view name);

// HELP text: backslash and newline escaped.
std::string escape_help(std::string_view help);
// Label value: backslash, double quote and newline escaped.
std::string escape_label_value(std::string_view value);

// A sample value: integers without a fraction, others with the shortest decimal form
// that reads back to the same double; "+Inf", "-Inf", "NaN".
std::string format_value(double v);

// `{a="x",b="y"}` (empty string for no labels), with `extra` appended as the last pair
// when non-empty (used for le="...").
std::string format_labels(const MetricLabels& labels, std::string_view extra_name = {},
                          std::string_view extra_value = {});

}  // namespace detinfer::metrics
