// Statements: text, output, if/for/set/macro/call/filter/with/generation blocks.
#include "jinja/parser.h"

#include <algorithm>

#include "detinfer/error.h"

namespace detinfer::jinja {

Parser::DepthGuard::DepthGuard(Parser& p) : parser(p) {
  if (++parser.depth_ > parser.max_depth_) {
    throw Error(ErrorCode::kResourceExhausted,
                "chat template nests deeper than " + std::to_string(parser.max_depth_) +
                    " levels (TemplateLimits::max_depth)",
                "chat_template");
  }
}

const Token& Parser::peek(std::size_t ahead) const {
  const std::size_t k = std::min(pos_ + ahead, lexed_.tokens.size() - 1);
  return lexed_.tokens[k];
}

const Token& Parser::next() {
  const Token& t = peek();
  if (pos_ + 1 < lexed_.tokens.size()) ++pos_;
  return t;
}

bool Parser::at_op(std::string_view op) const {
  return peek().type == TokenType::kOperator && peek().text == op;
}
bool Parser::at_name(std::string_view name) const {
  return peek().type == TokenType::kName && peek().text == name;
}
bool Parser::skip_op(std::string_view op) {
  if (!at_op(op)) return false;
  next();
  return true;
}
bool Parser::skip_name(std::string_view name) {
  if (!at_name(name)) return false;
  next();
  return true;
}

std::string Parser::describe(const Token& t) {
  switch (t.type) {
    case TokenType::kText:
      return "template data";
    case TokenType::kBlockBegin:
      return "begin of statement block";
    case TokenType::kBlockEnd:
      return "end of statement block";
    case TokenType::kVarBegin:
      return "begin of print statement";
    case TokenType::kVarEnd:
      return "end of print statement";
    case TokenType::kEof:
      return "end of template";
    case TokenType::kString:
      return "string";
    default:
      return t.text;
  }
}

void Parser::error_at(const Token& t, const std::string& what) const {
  syntax_error(lexed_.source, t.offset, what);
}

void Parser::expect_op(std::string_view op) {
  if (!skip_op(op)) {
    error_at(peek(), "expected token '" + std::string(op) + "', got '" + describe(peek()) + "'");
  }
}

void Parser::expect_block_end() {
  if (peek().type != TokenType::kBlockEnd) {
    error_at(peek(), "expected token 'end of statement block', got '" + describe(peek()) + "'");
  }
  next();
}

std::string Parser::expect_name() {
  if (peek().type != TokenType::kName) {
    error_at(peek(), "expected token 'name', got '" + describe(peek()) + "'");
  }
  return next().text;
}

NodeList Parser::parse_template() {
  NodeList body = parse_body({}, nullptr);
  return body;
}

NodeList Parser::parse_body(const std::vector<std::string_view>& end_tags, std::string* end_tag) {
  DepthGuard guard(*this);
  NodeList body;
  while (true) {
    const Token& t = peek();
    if (t.type == TokenType::kEof) {
      if (end_tags.empty()) return body;
      std::string expected;
      for (auto tag : end_tags)
        expected += (expected.empty() ? "'" : " or '") + std::string(tag) + "'";
      error_at(t, "Unexpected end of template. Jinja was looking for the following tags: " +
                      expected + ".");
    }
    if (t.type == TokenType::kText) {
      auto node = std::make_unique<Node>(NodeKind::kText, t.offset);
      node->name = next().text;
      body.push_back(std::move(node));
    } else if (t.type == TokenType::kVarBegin) {
      next();
      auto node = std::make_unique<Node>(NodeKind::kPrint, t.offset);
      node->args.push_back(parse_tuple_or_expression());
      if (peek().type != TokenType::kVarEnd) {
        error_at(peek(), "expected token 'end of print statement', got '" + describe(peek()) + "'");
      }
      next();
      body.push_back(std::move(node));
    } else if (t.type == TokenType::kBlockBegin) {
      const Token& tag = peek(1);
      if (tag.type == TokenType::kName &&
          std::find(end_tags.begin(), end_tags.end(), tag.text) != end_tags.end()) {
        next();
        *end_tag = next().text;
        return body;
      }
      body.push_back(parse_statement());
    } else {
      error_at(t, "unexpected '" + describe(t) + "'");
    }
  }
}

NodePtr Parser::parse_statement() {
  DepthGuard guard(*this);
  next();  // {%
  const Token& tag = peek();
  if (tag.type != TokenType::kName) error_at(tag, "tag name expected");
  const std::string name = next().text;
  const std::size_t offset = tag.offset;
  if (name == "if") return parse_if(offset);
  if (name == "for") return parse_for(offset);
  if (name == "set") return parse_set(offset);
  if (name == "macro") return parse_macro(offset);
  if (name == "call") return parse_call_block(offset);
  if (name == "filter") return parse_filter_block(offset);
  if (name == "with") return parse_with(offset);
  if (name == "break" || name == "continue") {
    expect_block_end();
    return std::make_unique<Node>(name == "break" ? NodeKind::kBreak : NodeKind::kContinue, offset);
  }
  if (name == "generation") {
    expect_block_end();
    auto node = std::make_unique<Node>(NodeKind::kGroup, offset);
    std::string end;
    node->body = parse_body({"endgeneration"}, &end);
    expect_block_end();
    return node;
  }
  error_at(tag, "Encountered unknown tag '" + name + "'.");
}

NodePtr Parser::parse_if(std::size_t offset) {
  DepthGuard guard(*this);
  auto node = std::make_unique<Node>(NodeKind::kIf, offset);
  node->args.push_back(parse_tuple_or_expression());
  expect_block_end();
  std::string end;
  node->body = parse_body({"elif", "else", "endif"}, &end);
  if (end == "elif") {
    node->else_body.push_back(parse_if(peek().offset));
  } else if (end == "else") {
    expect_block_end();
    node->else_body = parse_body({"endif"}, &end);
    expect_block_end();
  } else {
    expect_block_end();
  }
  return node;
}

namespace {
// Whether `loop` is named anywhere below (recursion bounded by the parse depth limit).
bool mentions_loop(const NodePtr& node);
bool mentions_loop(const NodeList& nodes) {
  for (const auto& n : nodes) {
    if (mentions_loop(n)) return true;
  }
  return false;
}
bool mentions_loop(const NodePtr& node) {
  if (!node) return false;
  if (node->kind == NodeKind::kName && node->name == "loop") return true;
  return mentions_loop(node->args) || mentions_loop(node->kwargs) || mentions_loop(node->body) ||
         mentions_loop(node->else_body);
}
}  // namespace

NodePtr Parser::parse_for(std::size_t offset) {
  auto node = std::make_unique<Node>(NodeKind::kFor, offset);
  const bool paren = skip_op("(");
  do {
    node->names.push_back(expect_name());
  } while (skip_op(","));
  if (paren) expect_op(")");
  if (!skip_name("in")) error_at(peek(), "expected token 'in', got '" + describe(peek()) + "'");
  node->args.push_back(parse_expression(false));
  if (at_op(",")) {  // `for x in a, b`: a tuple
    auto tuple = std::make_unique<Node>(NodeKind::kList, node->args[0]->offset);
    tuple->flag = true;
    tuple->args.push_back(std::move(node->args[0]));
    while (skip_op(",")) tuple->args.push_back(parse_expression(false));
    node->args[0] = std::move(tuple);
  }
  node->args.push_back(skip_name("if") ? parse_expression() : nullptr);
  if (at_name("recursive")) error_at(peek(), "recursive for loops are not supported");
  expect_block_end();
  std::string end;
  node->body = parse_body({"endfor", "else"}, &end);
  node->flag = mentions_loop(node->body) || (node->args[1] && mentions_loop(node->args[1]));
  if (end == "else") {
    expect_block_end();
    node->else_body = parse_body({"endfor"}, &end);
  }
  expect_block_end();
  return node;
}

NodePtr Parser::parse_set(std::size_t offset) {
  auto node = std::make_unique<Node>(NodeKind::kSet, offset);
  node->name = expect_name();
  if (skip_op(".")) {
    node->attr = expect_name();
  } else if (at_op(",")) {
    node->names.push_back(node->name);
    while (skip_op(",")) node->names.push_back(expect_name());
  }
  if (skip_op("=")) {
    node->args.push_back(parse_tuple_or_expression());
    expect_block_end();
    return node;
  }
  if (!node->names.empty()) error_at(peek(), "expected token '=', got '" + describe(peek()) + "'");
  node->kind = NodeKind::kSetBlock;
  node->args = parse_filter_chain();
  expect_block_end();
  std::string end;
  node->body = parse_body({"endset"}, &end);
  expect_block_end();
  return node;
}

void Parser::parse_params(Node& node) {
  expect_op("(");
  while (!at_op(")")) {
    if (!node.names.empty()) expect_op(",");
    if (at_op(")")) break;
    node.names.push_back(expect_name());
    node.kwargs.push_back(skip_op("=") ? parse_expression() : nullptr);
  }
  expect_op(")");
}

NodePtr Parser::parse_macro(std::size_t offset) {
  auto node = std::make_unique<Node>(NodeKind::kMacro, offset);
  node->name = expect_name();
  parse_params(*node);
  node->args = std::move(node->kwargs);
  expect_block_end();
  std::string end;
  node->body = parse_body({"endmacro"}, &end);
  skip_name(node->name);
  expect_block_end();
  return node;
}

NodePtr Parser::parse_call_block(std::size_t offset) {
  auto node = std::make_unique<Node>(NodeKind::kCallBlock, offset);
  if (at_op("(")) parse_params(*node);
  NodePtr call = parse_expression();
  if (call->kind != NodeKind::kCall) error_at(peek(), "expected call");
  node->args.push_back(std::move(call));
  expect_block_end();
  std::string end;
  node->body = parse_body({"endcall"}, &end);
  expect_block_end();
  return node;
}

NodeList Parser::parse_filter_chain() {
  NodeList filters;
  while (skip_op("|")) filters.push_back(parse_filter(nullptr));
  return filters;
}

NodePtr Parser::parse_filter_block(std::size_t offset) {
  auto node = std::make_unique<Node>(NodeKind::kFilterBlock, offset);
  node->args.push_back(parse_filter(nullptr));
  for (auto& f : parse_filter_chain()) node->args.push_back(std::move(f));
  expect_block_end();
  std::string end;
  node->body = parse_body({"endfilter"}, &end);
  expect_block_end();
  return node;
}

NodePtr Parser::parse_with(std::size_t offset) {
  auto node = std::make_unique<Node>(NodeKind::kWith, offset);
  while (peek().type != TokenType::kBlockEnd) {
    if (!node->names.empty()) expect_op(",");
    node->names.push_back(expect_name());
    expect_op("=");
    node->args.push_back(parse_expression());
  }
  expect_block_end();
  std::string end;
  node->body = parse_body({"endwith"}, &end);
  expect_block_end();
  return node;
}

}  // namespace detinfer::jinja
