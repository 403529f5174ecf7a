// Compile-time checks Jinja2 makes: every filter and test used exists.
#include "jinja/lexer.h"
#include "jinja/render.h"

namespace detinfer::jinja {

namespace {
void check(const NodeList& nodes, const std::string& source);

void check_node(const Node& node, const std::string& source) {
  if (node.kind == NodeKind::kFilter && !has_filter(node.name)) {
    syntax_error(source, node.offset, "No filter named '" + node.name + "'.");
  }
  if (node.kind == NodeKind::kTest && !has_test(node.name)) {
    syntax_error(source, node.offset, "No test named '" + node.name + "'.");
  }
  check(node.args, source);
  check(node.kwargs, source);
  check(node.body, source);
  check(node.else_body, source);
}

void check(const NodeList& nodes, const std::string& source) {
  for (const auto& n : nodes) {
    if (n) check_node(*n, source);
  }
}
}  // namespace

void validate(const NodeList& body, const std::string& source) { check(body, source); }

}  // namespace detinfer::jinja
