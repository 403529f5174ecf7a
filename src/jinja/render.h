// Evaluates a parsed template: one Evaluator per render (templates stay immutable).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jinja/ast.h"
#include "jinja/template.h"
#include "jinja/value.h"

namespace detinfer::jinja {

// Variables of one scope (template, loop iteration, macro call, with block).
struct Scope {
  std::vector<std::pair<std::string, Value>> vars;
  std::shared_ptr<Scope> parent;

  const Value* find(std::string_view name) const;
  void set(const std::string& name, Value value);
};

enum class Flow : std::uint8_t { kNormal, kBreak, kContinue };

class Evaluator {
 public:
  Evaluator(const TemplateLimits& limits, std::int64_t now_unix_seconds)
      : limits_(limits), now_(now_unix_seconds) {}

  std::string render(const NodeList& body, const Value& context);

  Value eval(const Node& node);
  Value call(const Value& callee, const CallArgs& args);
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  // A macro (or the caller of a call block): its parameters, defaults and body live in
  // the template; the scope it was defined in is held weakly (no reference cycles).
  struct MacroDef {
    std::string name;
    const std::vector<std::string>* params;
    const NodeList* defaults;
    const NodeList* body;
    std::weak_ptr<Scope> closure;
  };
  Value invoke_macro(const MacroDef& macro, const CallArgs& args);
  // namespace() objects may reference themselves; the evaluator empties them at the end.
  void track_namespace(const std::shared_ptr<Object>& ns) { namespaces_.push_back(ns); }

  // Resource accounting (Error kResourceExhausted past TemplateLimits).
  void charge_string(std::size_t bytes);
  void check_list_size(std::size_t items) const;
  void charge_iterations(std::int64_t n);

  const TemplateLimits& limits() const { return limits_; }
  std::int64_t now() const { return now_; }

  // Nesting guard for statements, expressions and calls.
  struct DepthGuard {
    explicit DepthGuard(Evaluator& e);
    ~DepthGuard() { --evaluator.depth_; }
    Evaluator& evaluator;
  };

 private:
  // Statements (render_stmt.cpp).
  Flow exec_body(const NodeList& body, std::string& out);
  Flow exec(const Node& node, std::string& out);
  void append_output(std::string& out, std::string_view text);
  Flow exec_if(const Node& node, std::string& out);
  Flow exec_for(const Node& node, std::string& out);
  void exec_set(const Node& node);
  void exec_set_block(const Node& node, std::string& out);
  void exec_macro(const Node& node);
  void exec_call_block(const Node& node, std::string& out);
  void exec_filter_block(const Node& node, std::string& out);
  Flow exec_with(const Node& node, std::string& out);
  void assign(const Node& node, const std::string& name, Value value);
  Value make_macro(const std::string& name, const std::vector<std::string>& params,
                   const NodeList& defaults, const NodeList& body);
  Value make_loop(const Array& items, std::size_t index);
  Value apply_filters(const NodeList& filters, Value value);

  // Expressions (render_expr.cpp).
  Value eval_name(const Node& node);
  Value eval_attr(const Node& node);
  Value eval_item(const Node& node);
  Value eval_slice(const Node& node);
  Value eval_call(const Node& node);
  Value eval_filter(const Node& node, Value operand);
  Value eval_test(const Node& node);
  Value eval_unary(const Node& node);
  Value eval_binary(const Node& node);
  Value eval_compare(const Node& node);
  Value eval_list(const Node& node);
  Value eval_dict(const Node& node);
  CallArgs eval_args(const Node& node, std::size_t first);

  const TemplateLimits& limits_;
  std::int64_t now_;
  std::shared_ptr<Scope> scope_;
  std::int32_t depth_ = 0;
  std::int64_t iterations_ = 0;
  std::int64_t work_ = 0;
  std::vector<std::weak_ptr<Object>> namespaces_;
};

// Attribute and item access with Jinja2's rules (undefined on a miss).
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
// Python slicing of lists, tuples and strings.
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// The binary operators + - * / // % ** ~ and `in`.
Value binary_op(Evaluator& e, std::string_view op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);
// Python's printf-style `fmt % args` (a tuple gives several arguments, a dict names them).
std::string percent_format(Evaluator& e, const std::string& fmt, const Value& args);

// Filters (filters*.cpp), tests (predicates.cpp), methods (methods.cpp), globals.
Value apply_filter(Evaluator& e, const std::string& name, const Value& operand,
                   const CallArgs& args);
bool apply_test(Evaluator& e, const std::string& name, const Value& operand, const CallArgs& args);
bool has_test(const std::string& name);
bool has_filter(const std::string& name);
// A method of a str, dict or list, bound to obj. Undefined without a message when there
// is none; undefined with the sandbox's message for mutating methods.
Value bound_method(const Value& obj, const std::string& name);
Value global_function(const std::string& name);  // undefined when unknown
// Syntax errors for unknown filters and tests (Jinja2 reports them when compiling).
void validate(const NodeList& body, const std::string& source);

}  // namespace detinfer::jinja
