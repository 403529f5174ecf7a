// Expressions, with Jinja2's precedence: conditional < or < and < not < comparisons <
// + - < ~ < * / // % < ** < unary - + < filters and tests < postfix (., [], call).
#include <array>

#include "jinja/parser.h"

namespace detinfer::jinja {

namespace {
NodePtr make(NodeKind kind, std::size_t offset) { return std::make_unique<Node>(kind, offset); }

NodePtr binary(std::string op, NodePtr left, NodePtr right) {
  auto node = make(NodeKind::kBinary, left->offset);
  node->name = std::move(op);
  node->args.push_back(std::move(left));
  node->args.push_back(std::move(right));
  return node;
}
}  // namespace

NodePtr Parser::parse_tuple_or_expression() {
  NodePtr first = parse_expression();
  if (!at_op(",")) return first;
  auto tuple = make(NodeKind::kList, first->offset);
  tuple->flag = true;
  tuple->args.push_back(std::move(first));
  while (skip_op(",")) {
    if (peek().type == TokenType::kBlockEnd || peek().type == TokenType::kVarEnd) break;
    tuple->args.push_back(parse_expression());
  }
  return tuple;
}

NodePtr Parser::parse_expression(bool with_condexpr) {
  DepthGuard guard(*this);
  NodePtr expr = parse_or();
  if (!with_condexpr) return expr;
  while (skip_name("if")) {
    auto cond = make(NodeKind::kCond, expr->offset);
    cond->args.push_back(std::move(expr));
    cond->args.push_back(parse_or());
    cond->args.push_back(skip_name("else") ? parse_expression() : nullptr);
    expr = std::move(cond);
  }
  return expr;
}

NodePtr Parser::parse_or() {
  NodePtr left = parse_and();
  while (skip_name("or")) left = binary("or", std::move(left), parse_and());
  return left;
}

NodePtr Parser::parse_and() {
  NodePtr left = parse_not();
  while (skip_name("and")) left = binary("and", std::move(left), parse_not());
  return left;
}

NodePtr Parser::parse_not() {
  DepthGuard guard(*this);
  if (at_name("not")) {
    auto node = make(NodeKind::kUnary, next().offset);
    node->name = "not";
    node->args.push_back(parse_not());
    return node;
  }
  return parse_compare();
}

NodePtr Parser::parse_compare() {
  NodePtr first = parse_math1();
  NodePtr node;
  static const std::array<std::string_view, 6> kOps = {"==", "!=", "<", "<=", ">", ">="};
  while (true) {
    std::string op;
    const Token& t = peek();
    if (t.type == TokenType::kOperator) {
      for (auto o : kOps) {
        if (t.text == o) op = std::string(o);
      }
    } else if (at_name("in")) {
      op = "in";
    } else if (at_name("not") && peek(1).type == TokenType::kName && peek(1).text == "in") {
      next();
      op = "not in";
    }
    if (op.empty()) break;
    next();
    if (!node) {
      node = make(NodeKind::kCompare, first->offset);
      node->args.push_back(std::move(first));
    }
    node->names.push_back(op);
    node->args.push_back(parse_math1());
  }
  return node ? std::move(node) : std::move(first);
}

NodePtr Parser::parse_math1() {
  NodePtr left = parse_concat();
  while (at_op("+") || at_op("-")) {
    std::string op = next().text;
    left = binary(op, std::move(left), parse_concat());
  }
  return left;
}

NodePtr Parser::parse_concat() {
  NodePtr left = parse_math2();
  while (skip_op("~")) left = binary("~", std::move(left), parse_math2());
  return left;
}

NodePtr Parser::parse_math2() {
  NodePtr left = parse_pow();
  while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
    std::string op = next().text;
    left = binary(op, std::move(left), parse_pow());
  }
  return left;
}

NodePtr Parser::parse_pow() {
  NodePtr left = parse_unary(true);
  while (skip_op("**")) left = binary("**", std::move(left), parse_unary(true));
  return left;
}

NodePtr Parser::parse_unary(bool with_filter) {
  DepthGuard guard(*this);
  NodePtr node;
  if (at_op("-") || at_op("+")) {
    node = make(NodeKind::kUnary, peek().offset);
    node->name = next().text;
    node->args.push_back(parse_unary(false));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  return with_filter ? parse_filter_expr(std::move(node)) : std::move(node);
}

NodePtr Parser::parse_primary() {
  DepthGuard guard(*this);
  const Token& t = peek();
  auto node = make(NodeKind::kLiteral, t.offset);
  switch (t.type) {
    case TokenType::kName:
      next();
      if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
        node->value = Value::boolean(t.text[0] == 't' || t.text[0] == 'T');
      } else if (t.text == "none" || t.text == "None") {
        node->value = Value::none();
      } else {
        node->kind = NodeKind::kName;
        node->name = t.text;
      }
      return node;
    case TokenType::kString: {
      std::string s = next().text;
      while (peek().type == TokenType::kString) s += next().text;
      node->value = Value::string(std::move(s));
      return node;
    }
    case TokenType::kInt:
      node->value = Value::integer(next().int_value);
      return node;
    case TokenType::kFloat:
      node->value = Value::number(next().float_value);
      return node;
    case TokenType::kOperator:
      if (t.text == "(") return parse_paren(next().offset);
      if (t.text == "[") return parse_list(next().offset);
      if (t.text == "{") return parse_dict(next().offset);
      break;
    default:
      break;
  }
  error_at(t, "unexpected '" + describe(t) + "'");
}

NodePtr Parser::parse_paren(std::size_t offset) {
  auto tuple = make(NodeKind::kList, offset);
  tuple->flag = true;
  bool comma = false;
  while (!at_op(")")) {
    if (!tuple->args.empty()) {
      expect_op(",");
      comma = true;
      if (at_op(")")) break;
    }
    tuple->args.push_back(parse_expression());
  }
  expect_op(")");
  if (tuple->args.size() == 1 && !comma) return std::move(tuple->args[0]);
  return tuple;
}

NodePtr Parser::parse_list(std::size_t offset) {
  auto list = make(NodeKind::kList, offset);
  while (!at_op("]")) {
    if (!list->args.empty()) {
      expect_op(",");
      if (at_op("]")) break;
    }
    list->args.push_back(parse_expression());
  }
  expect_op("]");
  return list;
}

NodePtr Parser::parse_dict(std::size_t offset) {
  auto dict = make(NodeKind::kDict, offset);
  while (!at_op("}")) {
    if (!dict->args.empty()) {
      expect_op(",");
      if (at_op("}")) break;
    }
    dict->args.push_back(parse_expression());
    expect_op(":");
    dict->kwargs.push_back(parse_expression());
  }
  expect_op("}");
  return dict;
}

NodePtr Parser::parse_postfix(NodePtr node) {
  while (true) {
    if (at_op(".") || at_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (at_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

NodePtr Parser::parse_subscript(NodePtr node) {
  DepthGuard guard(*this);
  const Token& t = next();
  if (t.text == ".") {
    const Token& attr = next();
    if (attr.type == TokenType::kName) {
      auto out = make(NodeKind::kAttr, t.offset);
      out->name = attr.text;
      out->args.push_back(std::move(node));
      return out;
    }
    if (attr.type != TokenType::kInt) error_at(attr, "expected name or number");
    auto out = make(NodeKind::kItem, t.offset);
    auto key = make(NodeKind::kLiteral, attr.offset);
    key->value = Value::integer(attr.int_value);
    out->args.push_back(std::move(node));
    out->args.push_back(std::move(key));
    return out;
  }
  NodePtr start = at_op(":") ? nullptr : parse_expression();
  if (!at_op(":")) {
    expect_op("]");
    auto out = make(NodeKind::kItem, t.offset);
    out->args.push_back(std::move(node));
    out->args.push_back(std::move(start));
    return out;
  }
  next();
  auto out = make(NodeKind::kSlice, t.offset);
  out->args.push_back(std::move(node));
  out->args.push_back(std::move(start));
  out->args.push_back(at_op("]") || at_op(":") ? nullptr : parse_expression());
  NodePtr step;
  if (skip_op(":") && !at_op("]")) step = parse_expression();
  out->args.push_back(std::move(step));
  expect_op("]");
  return out;
}

void Parser::parse_call_args(Node& call) {
  expect_op("(");
  bool first = true;
  while (!at_op(")")) {
    if (!first) {
      expect_op(",");
      if (at_op(")")) break;
    }
    first = false;
    if (peek().type == TokenType::kName && peek(1).type == TokenType::kOperator &&
        peek(1).text == "=") {
      call.names.push_back(next().text);
      next();
      call.kwargs.push_back(parse_expression());
    } else {
      if (!call.kwargs.empty()) error_at(peek(), "positional argument follows keyword argument");
      call.args.push_back(parse_expression());
    }
  }
  expect_op(")");
}

NodePtr Parser::parse_call(NodePtr callee) {
  auto call = make(NodeKind::kCall, peek().offset);
  call->args.push_back(std::move(callee));
  parse_call_args(*call);
  return call;
}

NodePtr Parser::parse_filter_expr(NodePtr node) {
  while (true) {
    if (skip_op("|")) {
      node = parse_filter(std::move(node));
    } else if (at_name("is")) {
      next();
      node = parse_test(std::move(node));
    } else if (at_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

NodePtr Parser::parse_filter(NodePtr operand) {
  DepthGuard guard(*this);
  auto node = make(NodeKind::kFilter, peek().offset);
  node->name = expect_name();
  node->args.push_back(std::move(operand));
  if (at_op("(")) parse_call_args(*node);
  return node;
}

NodePtr Parser::parse_test(NodePtr operand) {
  DepthGuard guard(*this);
  auto node = make(NodeKind::kTest, peek().offset);
  node->flag = skip_name("not");
  node->name = expect_name();
  node->args.push_back(std::move(operand));
  const Token& t = peek();
  const bool arg_start = t.type == TokenType::kName || t.type == TokenType::kString ||
                         t.type == TokenType::kInt || t.type == TokenType::kFloat ||
                         (t.type == TokenType::kOperator && (t.text == "[" || t.text == "{"));
  if (at_op("(")) {
    parse_call_args(*node);
  } else if (arg_start && !at_name("else") && !at_name("or") && !at_name("and")) {
    if (at_name("is")) error_at(t, "You cannot chain multiple tests with is");
    node->args.push_back(parse_postfix(parse_primary()));
  }
  return node;
}

}  // namespace detinfer::jinja
