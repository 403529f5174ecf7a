// Recursive-descent parser over the lexer's tokens (Jinja2's grammar and precedence).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace detinfer::jinja {

class Parser {
 public:
  Parser(const LexResult& lexed, std::int32_t max_depth) : lexed_(lexed), max_depth_(max_depth) {}

  // The whole template.
  NodeList parse_template();

 private:
  // Statements (parser.cpp).
  NodeList parse_body(const std::vector<std::string_view>& end_tags, std::string* end_tag);
  NodePtr parse_statement();
  NodePtr parse_if(std::size_t offset);
  NodePtr parse_for(std::size_t offset);
  NodePtr parse_set(std::size_t offset);
  NodePtr parse_macro(std::size_t offset);
  NodePtr parse_call_block(std::size_t offset);
  NodePtr parse_filter_block(std::size_t offset);
  NodePtr parse_with(std::size_t offset);
  void parse_params(Node& node);
  NodeList parse_filter_chain();
  void expect_block_end();
  std::string expect_name();

  // Expressions (parser_expr.cpp).
 public:
  NodePtr parse_expression(bool with_condexpr = true);
  NodePtr parse_tuple_or_expression();

 private:
  NodePtr parse_or();
  NodePtr parse_and();
  NodePtr parse_not();
  NodePtr parse_compare();
  NodePtr parse_math1();
  NodePtr parse_concat();
  NodePtr parse_math2();
  NodePtr parse_pow();
  NodePtr parse_unary(bool with_filter);
  NodePtr parse_primary();
  NodePtr parse_paren(std::size_t offset);
  NodePtr parse_list(std::size_t offset);
  NodePtr parse_dict(std::size_t offset);
  NodePtr parse_postfix(NodePtr node);
  NodePtr parse_subscript(NodePtr node);
  NodePtr parse_filter_expr(NodePtr node);
  NodePtr parse_filter(NodePtr operand);
  NodePtr parse_test(NodePtr operand);
  void parse_call_args(Node& call);
  // A call of `callee`: its argument list at the current "(".
  NodePtr parse_call(NodePtr callee);

  // Tokens.
  const Token& peek(std::size_t ahead = 0) const;
  const Token& next();
  bool at_op(std::string_view op) const;
  bool at_name(std::string_view name) const;
  bool skip_op(std::string_view op);
  bool skip_name(std::string_view name);
  void expect_op(std::string_view op);
  [[noreturn]] void error_at(const Token& t, const std::string& what) const;
  static std::string describe(const Token& t);

  // Nesting guard: every recursive parse function holds one.
  struct DepthGuard {
    explicit DepthGuard(Parser& p);
    ~DepthGuard() { --parser.depth_; }
    Parser& parser;
  };

  const LexResult& lexed_;
  std::int32_t max_depth_;
  std::int32_t depth_ = 0;
  std::size_t pos_ = 0;
};

}  // namespace detinfer::jinja
