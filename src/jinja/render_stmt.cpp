// Statements: output, if, for (with loop.*), set, macro/call, filter and with blocks.
#include "jinja/render.h"

namespace detinfer::jinja {

const Value* Scope::find(std::string_view name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent.get()) {
    for (auto it = s->vars.rbegin(); it != s->vars.rend(); ++it) {
      if (it->first == name) return &it->second;
    }
  }
  return nullptr;
}

void Scope::set(const std::string& name, Value value) {
  for (auto& [k, v] : vars) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  vars.emplace_back(name, std::move(value));
}

namespace {
[[noreturn]] void exhausted(const std::string& what) {
  throw Error(ErrorCode::kResourceExhausted, "chat template: " + what, "chat_template");
}
}  // namespace

Evaluator::DepthGuard::DepthGuard(Evaluator& e) : evaluator(e) {
  if (++evaluator.depth_ > evaluator.limits_.max_depth) {
    exhausted("evaluation nests deeper than " + std::to_string(evaluator.limits_.max_depth) +
              " levels (TemplateLimits::max_depth; a recursive macro?)");
  }
}

void Evaluator::charge_string(std::size_t bytes) {
  if (bytes > limits_.max_output_bytes) {
    exhausted("a string of " + std::to_string(bytes) + " bytes exceeds " +
              std::to_string(limits_.max_output_bytes) + " (TemplateLimits::max_output_bytes)");
  }
  work_ += static_cast<std::int64_t>(bytes);
  if (work_ > limits_.max_work_bytes) {
    exhausted("string operations produced more than " + std::to_string(limits_.max_work_bytes) +
              " bytes (TemplateLimits::max_work_bytes)");
  }
}

void Evaluator::check_list_size(std::size_t items) const {
  if (items > static_cast<std::size_t>(limits_.max_loop_iterations)) {
    exhausted("a list of " + std::to_string(items) + " items exceeds " +
              std::to_string(limits_.max_loop_iterations) +
              " (TemplateLimits::max_loop_iterations)");
  }
}

void Evaluator::charge_iterations(std::int64_t n) {
  iterations_ += n;
  if (iterations_ > limits_.max_loop_iterations) {
    exhausted("loops ran more than " + std::to_string(limits_.max_loop_iterations) +
              " iterations (TemplateLimits::max_loop_iterations)");
  }
}

std::string Evaluator::render(const NodeList& body, const Value& context) {
  scope_ = std::make_shared<Scope>();
  if (context.kind == Kind::kDict) {
    for (const auto& [k, v] : context.dict->entries) {
      if (k.kind == Kind::kString) scope_->set(k.str(), v);
    }
  }
  std::string out;
  if (exec_body(body, out) != Flow::kNormal) fail("'break' or 'continue' outside of a loop");
  return out;
}

void Evaluator::append_output(std::string& out, std::string_view text) {
  if (out.size() + text.size() > limits_.max_output_bytes) {
    exhausted("output exceeds " + std::to_string(limits_.max_output_bytes) +
              " bytes (TemplateLimits::max_output_bytes)");
  }
  work_ += static_cast<std::int64_t>(text.size());
  if (work_ > limits_.max_work_bytes) charge_string(0);
  out.append(text);
}

Flow Evaluator::exec_body(const NodeList& body, std::string& out) {
  for (const auto& node : body) {
    const Flow flow = exec(*node, out);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Flow Evaluator::exec(const Node& node, std::string& out) {
  DepthGuard guard(*this);
  switch (node.kind) {
    case NodeKind::kText:
      append_output(out, node.name);
      return Flow::kNormal;
    case NodeKind::kPrint: {
      const Value v = eval(*node.args[0]);
      if (v.kind == Kind::kString) {
        append_output(out, v.str());
      } else {
        append_output(out, to_str(v));
      }
      return Flow::kNormal;
    }
    case NodeKind::kIf:
      return exec_if(node, out);
    case NodeKind::kFor:
      return exec_for(node, out);
    case NodeKind::kSet:
      exec_set(node);
      return Flow::kNormal;
    case NodeKind::kSetBlock:
      exec_set_block(node, out);
      return Flow::kNormal;
    case NodeKind::kMacro:
      exec_macro(node);
      return Flow::kNormal;
    case NodeKind::kCallBlock:
      exec_call_block(node, out);
      return Flow::kNormal;
    case NodeKind::kFilterBlock:
      exec_filter_block(node, out);
      return Flow::kNormal;
    case NodeKind::kWith:
      return exec_with(node, out);
    case NodeKind::kBreak:
      return Flow::kBreak;
    case NodeKind::kContinue:
      return Flow::kContinue;
    case NodeKind::kGroup:
      return exec_body(node.body, out);
    default:
      fail("internal: expression where a statement belongs");
  }
}

Flow Evaluator::exec_if(const Node& node, std::string& out) {
  if (truthy(eval(*node.args[0]))) return exec_body(node.body, out);
  return exec_body(node.else_body, out);
}

void Evaluator::assign(const Node& node, const std::string& name, Value value) {
  if (node.attr.empty()) {
    scope_->set(name, std::move(value));
    return;
  }
  const Value* target = scope_->find(name);
  if (target == nullptr || target->kind != Kind::kNamespace) {
    fail("cannot assign attribute on non-namespace object");
  }
  target->dict->set(Value::string(node.attr), std::move(value));
}

void Evaluator::exec_set(const Node& node) {
  Value value = eval(*node.args[0]);
  if (node.names.empty()) {
    assign(node, node.name, std::move(value));
    return;
  }
  const Array items = iterate(value);
  if (items.size() != node.names.size()) {
    fail(items.size() > node.names.size()
             ? "too many values to unpack (expected " + std::to_string(node.names.size()) + ")"
             : "not enough values to unpack (expected " + std::to_string(node.names.size()) +
                   ", got " + std::to_string(items.size()) + ")");
  }
  for (std::size_t k = 0; k < items.size(); ++k) scope_->set(node.names[k], items[k]);
}

Value Evaluator::apply_filters(const NodeList& filters, Value value) {
  for (const auto& f : filters) value = eval_filter(*f, std::move(value));
  return value;
}

void Evaluator::exec_set_block(const Node& node, std::string& out) {
  (void)out;
  std::string captured;
  exec_body(node.body, captured);
  assign(node, node.name, apply_filters(node.args, Value::string(std::move(captured))));
}

void Evaluator::exec_filter_block(const Node& node, std::string& out) {
  std::string captured;
  exec_body(node.body, captured);
  const Value v = apply_filters(node.args, Value::string(std::move(captured)));
  append_output(out, to_str(v));
}

Flow Evaluator::exec_with(const Node& node, std::string& out) {
  auto inner = std::make_shared<Scope>();
  inner->parent = scope_;
  for (std::size_t k = 0; k < node.names.size(); ++k)
    inner->set(node.names[k], eval(*node.args[k]));
  std::shared_ptr<Scope> saved = scope_;
  scope_ = inner;
  const Flow flow = exec_body(node.body, out);
  scope_ = saved;
  return flow;
}

}  // namespace detinfer::jinja
