"""The Python half of Session: submit() futures, chat streaming and logits arrays."""

import concurrent.futures
import threading
from typing import Any, Iterable, List, Optional, Union

from . import _detinfer

_TEMPLATE_KEYS = ("add_generation_prompt", "template_name", "chat_template_kwargs", "now")


class Future(concurrent.futures.Future):
    """A submitted request: a concurrent.futures.Future of its GenerationResult.

    Works with concurrent.futures.wait/as_completed and add_done_callback. Requests
    submitted together (from one thread or many) are batched by the engine; in canonical
    mode each result is bitwise the one it would have had alone.

    ``cancel()`` stops the generation at its next step; the future then completes with
    the tokens generated so far and ``finish_reason == "cancelled"`` (it returns False,
    as for any running future).
    """

    def __init__(self, request: "_detinfer._Request") -> None:
        super().__init__()
        self._request = request
        self.request_id: int = request.id
        self.set_running_or_notify_cancel()
        threading.Thread(target=self._wait, name=f"detinfer-request-{request.id}",
                         daemon=True).start()

    def _wait(self) -> None:
        try:
            result = self._request.wait()  # releases the GIL while the engine works
        except BaseException as e:  # noqa: BLE001 - handed to the waiter
            self.set_exception(e)
        else:
            self.set_result(result)

    def cancel(self) -> bool:
        self._request.cancel()
        return False


class Session(_detinfer.Session):
    __doc__ = _detinfer.Session.__doc__

    def submit(self, prompt: Union[str, Iterable[int]], **config: Any) -> Future:
        """Queues a request and returns at once with a Future of its GenerationResult.

        Invalid arguments raise here; failures while running are raised by result().
        """
        return Future(self._submit(prompt, **config))

    def stream_chat(self, messages: List[dict], tools: Optional[List[dict]] = None,
                    **config: Any) -> "_detinfer.Stream":
        """chat() as a stream of TokenDelta (the same arguments)."""
        template = {k: config.pop(k) for k in _TEMPLATE_KEYS if k in config}
        ids = self.encode_chat(messages, tools=tools, **template)
        merged = self.default_generation_config()
        merged.update(config)
        return self.stream(ids, **merged)

    def logits(self, tokens: Iterable[int], threads: int = 1):
        """logits(tokens) -> numpy.ndarray float32 [len(tokens), vocab_size] (read-only).

        One prefill of this session's model in its numerics mode, as `detinfer logits`
        computes it (the model is loaded again for it).
        """
        return logits(self.model_dir, tokens, mode=self.mode, threads=threads)

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def logits(model: str, tokens: Iterable[int], mode: str = "canonical", threads: int = 1):
    """The float32 logits [len(tokens), vocab_size] of every position of a prompt.

    The same numbers as `detinfer logits --model MODEL --tokens ...` writes. The array
    shares the memory the C++ side filled (no copy) and is read-only.
    """
    import numpy

    return numpy.asarray(_detinfer._logits(model, tokens, mode, threads))
