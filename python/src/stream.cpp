// Stream and Request (stream.h) and their Python classes.
#include "stream.h"

#include <pybind11/stl.h>

#include "bindings.h"

namespace detinfer_py {

Stream::Stream(detinfer::DeterministicSession& session, const detinfer::Prompt& prompt,
               const detinfer::GenerationConfig& config) {
  std::shared_ptr<State> st = state_;
  handle_ = session.submit(prompt, config, [st](const detinfer::TokenEvent& e) {
    TokenDelta d;
    d.token = e.token;
    d.text = e.text;
    d.sample_index = e.sample_index;
    d.step = e.step;
    if (e.logprobs != nullptr) {
      d.logprob = e.logprobs->logprob;
      d.top = e.logprobs->top;
    }
    {
      std::lock_guard<std::mutex> lock(st->mu);
      st->queue.push_back(std::move(d));
    }
    st->cv.notify_one();
    return true;
  });
  waiter_ = std::thread([st, this] {
    std::optional<detinfer::GenerationResult> r;
    std::exception_ptr error;
    try {
      r = handle_.future().get();
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(st->mu);
      st->result = std::move(r);
      st->error = error;
      st->done = true;
    }
    st->cv.notify_all();
  });
}

Stream::~Stream() {
  handle_.cancel();
  if (waiter_.joinable()) waiter_.join();
}

std::optional<TokenDelta> Stream::next() {
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait(lock, [&] { return !state_->queue.empty() || state_->done; });
  if (!state_->queue.empty()) {
    TokenDelta d = std::move(state_->queue.front());
    state_->queue.pop_front();
    return d;
  }
  if (state_->error) std::rethrow_exception(state_->error);
  if (state_->result) result_ = std::move(state_->result);
  state_->result.reset();
  return std::nullopt;
}

detinfer::GenerationResult Request::wait() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!result_ && !error_) {
    try {
      result_ = handle_.future().get();
    } catch (...) {
      error_ = std::current_exception();
    }
  }
  if (error_) std::rethrow_exception(error_);
  return *result_;
}

void bind_stream(py::module_& m) {
  py::class_<TokenDelta>(m, "TokenDelta",
                         "One generated token of a stream: its id, the text that became final "
                         "with it (possibly ''), which sample and step, and logprobs when asked.")
      .def_readonly("token", &TokenDelta::token)
      .def_readonly("text", &TokenDelta::text)
      .def_readonly("sample_index", &TokenDelta::sample_index)
      .def_readonly("step", &TokenDelta::step)
      .def_readonly("logprob", &TokenDelta::logprob)
      .def_readonly("top", &TokenDelta::top)
      .def("__repr__", [](const TokenDelta& d) {
        return "TokenDelta(token=" + std::to_string(d.token) +
               ", text=" + py::repr(py::str(d.text)).cast<std::string>() +
               ", step=" + std::to_string(d.step) + ")";
      });
  py::class_<Stream>(m, "Stream",
                     "An iterator of TokenDelta. The engine runs without the GIL; .result is the "
                     "whole GenerationResult once the iterator is exhausted. Dropping or "
                     "cancel()ing it cancels the request.")
      .def(
          "__iter__", [](Stream& s) -> Stream& { return s; },
          py::return_value_policy::reference_internal)
      .def("__next__",
           [](Stream& s) {
             std::optional<TokenDelta> d;
             {
               py::gil_scoped_release release;
               d = s.next();
             }
             if (!d) throw py::stop_iteration();
             return *d;
           })
      .def("cancel", &Stream::cancel, "Stop the request at its next step (finish 'cancelled').")
      .def_property_readonly(
          "result", [](const Stream& s) { return s.result(); },
          "The GenerationResult once the stream is exhausted, else None.");
  py::class_<Request>(m, "_Request", "A submitted request (wrapped by detinfer.Future).")
      .def_property_readonly("id", &Request::id)
      .def("cancel", &Request::cancel)
      .def("wait", &Request::wait, py::call_guard<py::gil_scoped_release>());
}

}  // namespace detinfer_py
