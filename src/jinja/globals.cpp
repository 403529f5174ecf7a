// Global functions: range, namespace, dict, joiner, raise_exception, strftime_now.
#include <ctime>

#include "jinja/render.h"

namespace detinfer::jinja {

namespace {

// The immutable sandbox's range(): at most 100000 items (jinja2.sandbox.MAX_RANGE).
constexpr std::int64_t kMaxRange = 100000;

std::int64_t int_arg(const Value& v) {
  if (v.kind == Kind::kInt) return v.i;
  if (v.kind == Kind::kBool) return v.b ? 1 : 0;
  if (v.is_undefined()) fail_undefined(v);
  fail("'" + python_type_name(v) + "' object cannot be interpreted as an integer");
}

Value range(Evaluator& e, const CallArgs& args) {
  const Array& p = args.positional;
  if (p.empty() || p.size() > 3)
    fail("range expected 1 to 3 arguments, got " + std::to_string(p.size()));
  std::int64_t start = 0;
  std::int64_t stop = 0;
  std::int64_t step = 1;
  if (p.size() == 1) {
    stop = int_arg(p[0]);
  } else {
    start = int_arg(p[0]);
    stop = int_arg(p[1]);
    if (p.size() == 3) step = int_arg(p[2]);
  }
  if (step == 0) fail("range() arg 3 must not be zero");
  // Length computed in long double: the operands may be anywhere in int64.
  const long double span = static_cast<long double>(stop) - static_cast<long double>(start);
  long double len = step > 0 ? (span + step - 1) / step : (span + step + 1) / step;
  if (len < 0) len = 0;
  if (len > kMaxRange) {
    fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  }
  const auto n = static_cast<std::size_t>(len);
  e.check_list_size(n);
  Array out;
  out.reserve(n);
  for (std::size_t k = 0; k < n; ++k)
    out.push_back(Value::integer(start + static_cast<std::int64_t>(k) * step));
  return Value::array(std::move(out));
}

std::shared_ptr<Object> keyword_object(const CallArgs& args) {
  auto o = std::make_shared<Object>();
  for (const Value& p : args.positional) {
    if (p.kind != Kind::kDict) fail("namespace() and dict() take keyword arguments or a dict");
    for (const auto& [k, v] : p.dict->entries) o->set(k, v);
  }
  for (const auto& [k, v] : args.keyword) o->set(Value::string(k), v);
  return o;
}

Value make_namespace(Evaluator& e, const CallArgs& args) {
  Value v;
  v.kind = Kind::kNamespace;
  v.dict = keyword_object(args);
  e.track_namespace(v.dict);
  return v;
}

Value make_dict(Evaluator&, const CallArgs& args) {
  return Value::dictionary(keyword_object(args));
}

Value raise_exception(Evaluator&, const CallArgs& args) {
  const Value* msg = args.get("message", 0);
  throw Error(ErrorCode::kInvalidArgument, msg != nullptr ? to_str(*msg) : std::string(),
              "messages");
}

Value strftime_now(Evaluator& e, const CallArgs& args) {
  const Value* fmt = args.get("format", 0);
  if (fmt == nullptr || fmt->kind != Kind::kString) fail("strftime_now() takes a format string");
  if (fmt->str().size() > 1024) fail("strftime_now(): format longer than 1024 bytes");
  const std::time_t t = static_cast<std::time_t>(e.now());
  std::tm tm{};
  if (gmtime_r(&t, &tm) == nullptr) fail("strftime_now(): time out of range");
  std::string buf(fmt->str().size() * 64 + 64, '\0');
  const std::size_t n = std::strftime(buf.data(), buf.size(), fmt->str().c_str(), &tm);
  buf.resize(n);
  return Value::string(std::move(buf));
}

Value joiner(Evaluator&, const CallArgs& args) {
  const Value* sep = args.get("sep", 0);
  auto used = std::make_shared<bool>(false);
  auto fn = std::make_shared<Function>();
  fn->name = "joiner";
  const std::string text = sep != nullptr ? to_str(*sep) : ", ";
  fn->call = [used, text](Evaluator&, const CallArgs&) {
    if (!*used) {
      *used = true;
      return Value::string("");
    }
    return Value::string(text);
  };
  Value v;
  v.kind = Kind::kFunction;
  v.fn = std::move(fn);
  return v;
}

Value function(const char* name, Value (*impl)(Evaluator&, const CallArgs&)) {
  auto fn = std::make_shared<Function>();
  fn->name = name;
  fn->call = impl;
  Value v;
  v.kind = Kind::kFunction;
  v.fn = std::move(fn);
  return v;
}

}  // namespace

Value global_function(const std::string& name) {
  if (name == "range") return function("range", range);
  if (name == "namespace") return function("namespace", make_namespace);
  if (name == "dict") return function("dict", make_dict);
  if (name == "raise_exception") return function("raise_exception", raise_exception);
  if (name == "strftime_now") return function("strftime_now", strftime_now);
  if (name == "joiner") return function("joiner", joiner);
  return Value::undefined("'" + name + "' is undefined");
}

}  // namespace detinfer::jinja
