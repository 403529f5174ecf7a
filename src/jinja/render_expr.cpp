// Expressions: names, literals, attribute/item access, calls, filters, tests, operators.
#include "jinja/render.h"

namespace detinfer::jinja {

Value Evaluator::eval(const Node& node) {
  DepthGuard guard(*this);
  switch (node.kind) {
    case NodeKind::kLiteral:
      return node.value;
    case NodeKind::kName:
      return eval_name(node);
    case NodeKind::kList:
      return eval_list(node);
    case NodeKind::kDict:
      return eval_dict(node);
    case NodeKind::kAttr:
      return eval_attr(node);
    case NodeKind::kItem:
      return eval_item(node);
    case NodeKind::kSlice:
      return eval_slice(node);
    case NodeKind::kCall:
      return eval_call(node);
    case NodeKind::kFilter:
      return eval_filter(node, eval(*node.args[0]));
    case NodeKind::kTest:
      return eval_test(node);
    case NodeKind::kUnary:
      return eval_unary(node);
    case NodeKind::kBinary:
      return eval_binary(node);
    case NodeKind::kCompare:
      return eval_compare(node);
    case NodeKind::kCond: {
      if (truthy(eval(*node.args[1]))) return eval(*node.args[0]);
      if (node.args[2]) return eval(*node.args[2]);
      return Value::undefined(
          "the inline if-expression on line evaluated to false and no else "
          "section was defined.");
    }
    default:
      fail("internal: statement where an expression belongs");
  }
}

Value Evaluator::eval_name(const Node& node) {
  if (const Value* v = scope_->find(node.name)) return *v;
  Value g = global_function(node.name);
  if (!g.is_undefined()) return g;
  return Value::undefined("'" + node.name + "' is undefined");
}

Value Evaluator::eval_list(const Node& node) {
  check_list_size(node.args.size());
  Array items;
  items.reserve(node.args.size());
  for (const auto& a : node.args) items.push_back(eval(*a));
  return Value::array(std::move(items), node.flag);
}

Value Evaluator::eval_dict(const Node& node) {
  auto o = std::make_shared<Object>();
  for (std::size_t k = 0; k < node.args.size(); ++k) {
    Value key = eval(*node.args[k]);
    if (key.kind == Kind::kList && !key.b) fail("unhashable type: 'list'");
    if (key.kind == Kind::kDict) fail("unhashable type: 'dict'");
    o->set(key, eval(*node.kwargs[k]));
  }
  return Value::dictionary(std::move(o));
}

Value Evaluator::eval_attr(const Node& node) {
  const Value obj = eval(*node.args[0]);
  return get_attr(obj, node.name);
}

Value Evaluator::eval_item(const Node& node) {
  const Value obj = eval(*node.args[0]);
  return get_item(obj, eval(*node.args[1]));
}

Value Evaluator::eval_slice(const Node& node) {
  const Value obj = eval(*node.args[0]);
  auto part = [&](std::size_t k) { return node.args[k] ? eval(*node.args[k]) : Value::none(); };
  const Value start = part(1);
  const Value stop = part(2);
  const Value step = part(3);
  return slice(obj, start, stop, step);
}

CallArgs Evaluator::eval_args(const Node& node, std::size_t first) {
  CallArgs args;
  for (std::size_t k = first; k < node.args.size(); ++k)
    args.positional.push_back(eval(*node.args[k]));
  for (std::size_t k = 0; k < node.names.size(); ++k) {
    args.keyword.emplace_back(node.names[k], eval(*node.kwargs[k]));
  }
  return args;
}

Value Evaluator::call(const Value& callee, const CallArgs& args) {
  DepthGuard guard(*this);
  if (callee.kind == Kind::kFunction) return callee.fn->call(*this, args);
  if (callee.is_undefined()) fail_undefined(callee);
  fail("'" + python_type_name(callee) + "' object is not callable");
}

Value Evaluator::eval_call(const Node& node) {
  const Value callee = eval(*node.args[0]);
  const CallArgs args = eval_args(node, 1);
  return call(callee, args);
}

Value Evaluator::eval_filter(const Node& node, Value operand) {
  const CallArgs args = eval_args(node, 1);
  return apply_filter(*this, node.name, operand, args);
}

Value Evaluator::eval_test(const Node& node) {
  const Value operand = eval(*node.args[0]);
  const CallArgs args = eval_args(node, 1);
  const bool result = apply_test(*this, node.name, operand, args);
  return Value::boolean(node.flag ? !result : result);
}

Value Evaluator::eval_unary(const Node& node) {
  const Value v = eval(*node.args[0]);
  if (node.name == "not") return Value::boolean(!truthy(v));
  if (v.is_undefined()) fail_undefined(v);
  if (v.kind == Kind::kFloat) return Value::number(node.name == "-" ? -v.f : v.f);
  if (v.kind == Kind::kInt || v.kind == Kind::kBool) {
    const std::int64_t i = v.kind == Kind::kInt ? v.i : (v.b ? 1 : 0);
    if (node.name == "-" && i == INT64_MIN) fail("integer overflow");
    return Value::integer(node.name == "-" ? -i : i);
  }
  fail("bad operand type for unary " + node.name + ": '" + python_type_name(v) + "'");
}

Value Evaluator::eval_binary(const Node& node) {
  if (node.name == "and") {
    Value left = eval(*node.args[0]);
    return truthy(left) ? eval(*node.args[1]) : left;
  }
  if (node.name == "or") {
    Value left = eval(*node.args[0]);
    return truthy(left) ? left : eval(*node.args[1]);
  }
  const Value left = eval(*node.args[0]);
  const Value right = eval(*node.args[1]);
  return binary_op(*this, node.name, left, right);
}

Value Evaluator::eval_compare(const Node& node) {
  Value left = eval(*node.args[0]);
  for (std::size_t k = 0; k < node.names.size(); ++k) {
    Value right = eval(*node.args[k + 1]);
    const std::string& op = node.names[k];
    bool r = false;
    if (op == "==") {
      r = equals(left, right);
    } else if (op == "!=") {
      r = !equals(left, right);
    } else if (op == "<") {
      r = less(left, right);
    } else if (op == ">") {
      r = less(right, left);
    } else if (op == "<=") {
      r = !less(right, left);
    } else if (op == ">=") {
      r = !less(left, right);
    } else if (op == "in") {
      r = contains(right, left);
    } else {
      r = !contains(right, left);
    }
    if (!r) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

}  // namespace detinfer::jinja
