#include "jinja/template.h"

#include "detinfer/error.h"
#include "jinja/ast.h"
#include "jinja/lexer.h"
#include "jinja/parser.h"
#include "jinja/render.h"

namespace detinfer::jinja {

struct TemplateProgram {
  TemplateLimits limits;
  TemplateProgramData data;
};

Template::Template(std::shared_ptr<const TemplateProgram> program) : program_(std::move(program)) {}

Template Template::parse(std::string_view source, const TemplateLimits& limits) {
  if (source.size() > limits.max_source_bytes) {
    throw Error(ErrorCode::kResourceExhausted,
                "chat template of " + std::to_string(source.size()) + " bytes exceeds " +
                    std::to_string(limits.max_source_bytes) + " (TemplateLimits::max_source_bytes)",
                "chat_template");
  }
  LexResult lexed = lex(source);
  auto program = std::make_shared<TemplateProgram>();
  program->limits = limits;
  program->data.body = Parser(lexed, limits.max_depth).parse_template();
  validate(program->data.body, lexed.source);
  program->data.source = std::move(lexed.source);
  return Template(std::move(program));
}

std::string Template::render(const nlohmann::ordered_json& context,
                             std::int64_t now_unix_seconds) const {
  const Value ctx = from_json(context);
  Evaluator evaluator(program_->limits, now_unix_seconds);
  return evaluator.render(program_->data.body, ctx);
}

const TemplateLimits& Template::limits() const noexcept { return program_->limits; }

}  // namespace detinfer::jinja
