// for loops (loop.*, filters, else, break/continue) and macros / call blocks.
#include "jinja/render.h"

namespace detinfer::jinja {

Evaluator::~Evaluator() {
  for (auto& weak : namespaces_) {
    if (auto ns = weak.lock()) ns->entries.clear();
  }
}

namespace {

void bind_targets(Scope& scope, const std::vector<std::string>& names, const Value& item) {
  if (names.size() == 1) {
    scope.set(names[0], item);
    return;
  }
  const Array parts = iterate(item);
  if (parts.size() != names.size()) {
    fail(parts.size() > names.size()
             ? "too many values to unpack (expected " + std::to_string(names.size()) + ")"
             : "not enough values to unpack (expected " + std::to_string(names.size()) + ", got " +
                   std::to_string(parts.size()) + ")");
  }
  for (std::size_t k = 0; k < names.size(); ++k) scope.set(names[k], parts[k]);
}

}  // namespace

Value Evaluator::make_loop(const Array& items, std::size_t index) {
  static const char* const kKeys[] = {"index",  "index0",   "revindex", "revindex0",
                                      "first",  "last",     "length",   "depth",
                                      "depth0", "previtem", "nextitem", "cycle"};
  static const std::vector<Value> keys = [] {
    std::vector<Value> v;
    for (const char* k : kKeys) v.push_back(Value::string(k));
    return v;
  }();
  auto loop = std::make_shared<Object>();
  loop->entries.reserve(12);
  const auto n = static_cast<std::int64_t>(items.size());
  const auto k = static_cast<std::int64_t>(index);
  const Value values[] = {
      Value::integer(k + 1),     Value::integer(k),      Value::integer(n - k),
      Value::integer(n - k - 1), Value::boolean(k == 0), Value::boolean(k == n - 1),
      Value::integer(n),         Value::integer(1),      Value::integer(0)};
  for (std::size_t f = 0; f < 9; ++f) loop->entries.emplace_back(keys[f], values[f]);
  if (index > 0) loop->entries.emplace_back(keys[9], items[index - 1]);
  if (index + 1 < items.size()) loop->entries.emplace_back(keys[10], items[index + 1]);
  auto cycle = std::make_shared<Function>();
  cycle->name = "cycle";
  cycle->call = [index](Evaluator&, const CallArgs& args) -> Value {
    if (args.positional.empty()) fail("no items for cycling given");
    return args.positional[index % args.positional.size()];
  };
  Value fn;
  fn.kind = Kind::kFunction;
  fn.fn = std::move(cycle);
  loop->entries.emplace_back(keys[11], std::move(fn));
  return Value::dictionary(std::move(loop));
}

Flow Evaluator::exec_for(const Node& node, std::string& out) {
  Array items = iterate(eval(*node.args[0]));
  std::shared_ptr<Scope> saved = scope_;
  if (node.args[1]) {  // `for x in xs if cond`: loop.* counts the kept items
    Array kept;
    for (auto& item : items) {
      charge_iterations(1);
      scope_ = std::make_shared<Scope>();
      scope_->parent = saved;
      bind_targets(*scope_, node.names, item);
      const bool keep = truthy(eval(*node.args[1]));
      scope_ = saved;
      if (keep) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec_body(node.else_body, out);
  // One scope for the loop, emptied at each iteration (variables set in an iteration do
  // not survive it, as in Jinja2).
  auto iteration = std::make_shared<Scope>();
  iteration->parent = saved;
  for (std::size_t k = 0; k < items.size(); ++k) {
    charge_iterations(1);
    iteration->vars.clear();
    bind_targets(*iteration, node.names, items[k]);
    if (node.flag) iteration->set("loop", make_loop(items, k));
    scope_ = iteration;
    const Flow flow = exec_body(node.body, out);
    scope_ = saved;
    if (flow == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

Value Evaluator::make_macro(const std::string& name, const std::vector<std::string>& params,
                            const NodeList& defaults, const NodeList& body) {
  auto fn = std::make_shared<Function>();
  fn->name = name;
  MacroDef def{name, &params, &defaults, &body, scope_};
  fn->call = [def](Evaluator& e, const CallArgs& args) { return e.invoke_macro(def, args); };
  Value v;
  v.kind = Kind::kFunction;
  v.fn = std::move(fn);
  return v;
}

Value Evaluator::invoke_macro(const MacroDef& macro, const CallArgs& args) {
  DepthGuard guard(*this);
  std::shared_ptr<Scope> closure = macro.closure.lock();
  if (!closure) fail("macro '" + macro.name + "' called after its scope ended");
  auto scope = std::make_shared<Scope>();
  scope->parent = closure;
  const std::vector<std::string>& params = *macro.params;
  std::vector<bool> bound(params.size(), false);
  Array varargs;
  for (std::size_t k = 0; k < args.positional.size(); ++k) {
    if (k < params.size()) {
      scope->set(params[k], args.positional[k]);
      bound[k] = true;
    } else {
      varargs.push_back(args.positional[k]);
    }
  }
  auto kwargs = std::make_shared<Object>();
  for (const auto& [key, value] : args.keyword) {
    std::size_t k = 0;
    while (k < params.size() && params[k] != key) ++k;
    if (k < params.size()) {
      scope->set(key, value);
      bound[k] = true;
    } else if (key == "caller") {
      scope->set("caller", value);
    } else {
      kwargs->set(Value::string(key), value);
    }
  }
  std::shared_ptr<Scope> saved = scope_;
  scope_ = scope;
  for (std::size_t k = 0; k < params.size(); ++k) {
    if (bound[k]) continue;
    const NodePtr& def = (*macro.defaults)[k];
    scope->set(params[k], def ? eval(*def) : Value::undefined("'" + params[k] + "' is undefined"));
  }
  scope->set("varargs", Value::array(std::move(varargs), true));
  scope->set("kwargs", Value::dictionary(std::move(kwargs)));
  std::string out;
  exec_body(*macro.body, out);
  scope_ = saved;
  return Value::string(std::move(out));
}

void Evaluator::exec_macro(const Node& node) {
  scope_->set(node.name, make_macro(node.name, node.names, node.args, node.body));
}

void Evaluator::exec_call_block(const Node& node, std::string& out) {
  const Node& call_node = *node.args[0];
  const Value callee = eval(*call_node.args[0]);
  CallArgs args = eval_args(call_node, 1);
  args.keyword.emplace_back("caller", make_macro("caller", node.names, node.kwargs, node.body));
  const Value result = call(callee, args);
  append_output(out, to_str(result));
}

}  // namespace detinfer::jinja
