# Type stubs of the C++ extension detinfer._detinfer (python/src/).
from typing import Any, Dict, Iterable, Iterator, List, Optional, Union, overload

__version__: str
SESSION_OPTIONS: List[str]
GENERATION_FIELDS: List[str]

Prompt = Union[str, Iterable[int]]

class TokenLogprob:
    token: int
    logprob: float

class StepLogprobs:
    token: int
    logprob: float
    top: List[TokenLogprob]

class Timings:
    queue_ms: float
    time_to_first_token_ms: float
    token_ms: List[float]
    total_ms: float

class CacheUsage:
    prefix_cached_tokens: int
    result_cache_hit: bool

class Sequence:
    tokens: List[int]
    text: str
    finish_reason: str  # "length" | "stop" | "cancelled"
    logprobs: List[StepLogprobs]
    score: float
    digest: int
    digest_hex: str
    step_digests: List[int]

class GenerationResult:
    prompt_tokens: List[int]
    sequences: List[Sequence]
    seed: int
    timings: Timings
    cache: CacheUsage
    fingerprint_json: str
    transcript_json: str
    tokens: List[int]
    text: str
    finish_reason: str
    digest: int
    digest_hex: str
    step_digests: List[int]
    logprobs: List[StepLogprobs]

class TokenDelta:
    token: int
    text: str
    sample_index: int
    step: int
    logprob: Optional[float]
    top: List[TokenLogprob]

class Stream(Iterator[TokenDelta]):
    def __iter__(self) -> "Stream": ...
    def __next__(self) -> TokenDelta: ...
    def cancel(self) -> None: ...
    @property
    def result(self) -> Optional[GenerationResult]: ...

class _Request:
    id: int
    def cancel(self) -> None: ...
    def wait(self) -> GenerationResult: ...

class Tokenizer:
    @staticmethod
    def load(path: str) -> "Tokenizer": ...
    def encode(self, text: str, add_special_tokens: bool = ...) -> List[int]: ...
    def decode(self, ids: Iterable[int], skip_special_tokens: bool = ...) -> str: ...
    vocab_size: int
    def token_to_id(self, token: str) -> Optional[int]: ...
    def id_to_token(self, id: int) -> Optional[str]: ...
    bos_token_id: Optional[int]
    eos_token_id: Optional[int]
    def is_special(self, id: int) -> bool: ...
    hash: str

class FingerprintDiff:
    groups: Dict[str, List[str]]
    outputs_identical: bool
    output_note: str
    identical: bool
    reproduced: bool
    divergence_step: Optional[int]
    def to_text(self) -> str: ...
    def to_json(self, indent: int = ...) -> str: ...

class ReplayReport:
    verdict: str  # "reproduced" | "diverged" | "refused"
    reason: str
    diff: FingerprintDiff
    reproduced: bool
    def to_text(self) -> str: ...

def diff(a: str, b: str) -> FingerprintDiff: ...

class VerifyDivergence:
    sample: int
    step: int
    expected_token: int
    recorded_token: int
    expected_digest: int
    recorded_digest: int
    reason: str  # "token" | "digest" | "token and digest" | "chain digest" | ...

class VerifyResult:
    verified: bool
    divergence: Optional[VerifyDivergence]
    steps_checked: int
    message: str
    def __bool__(self) -> bool: ...

class _LogitsBuffer:
    model_fingerprint: str

def _logits(model: str, tokens: Iterable[int], mode: str, threads: int) -> _LogitsBuffer: ...

class Session:
    def __init__(self, model: str, **options: Any) -> None: ...
    def generate(self, prompt: Prompt, **config: Any) -> GenerationResult: ...
    def stream(self, prompt: Prompt, **config: Any) -> Stream: ...
    def _submit(self, prompt: Prompt, **config: Any) -> _Request: ...
    def chat(self, messages: List[Dict[str, Any]], *, tools: Optional[List[Dict[str, Any]]] = ...,
             add_generation_prompt: bool = ..., template_name: str = ...,
             chat_template_kwargs: Optional[Dict[str, Any]] = ..., now: Optional[int] = ...,
             **config: Any) -> GenerationResult: ...
    def apply_chat_template(self, messages: List[Dict[str, Any]], *,
                            tools: Optional[List[Dict[str, Any]]] = ...,
                            add_generation_prompt: bool = ..., template_name: str = ...,
                            chat_template_kwargs: Optional[Dict[str, Any]] = ...,
                            now: Optional[int] = ...) -> str: ...
    def encode_chat(self, messages: List[Dict[str, Any]], *,
                    tools: Optional[List[Dict[str, Any]]] = ...,
                    add_generation_prompt: bool = ..., template_name: str = ...,
                    chat_template_kwargs: Optional[Dict[str, Any]] = ...,
                    now: Optional[int] = ...) -> List[int]: ...
    has_chat_template: bool
    def default_generation_config(self) -> Dict[str, Any]: ...
    model_dir: str
    model_fingerprint: str
    tokenizer_hash: str
    mode: str
    threads: int
    eos_token_ids: List[int]
    vocab_size: int
    context_length: int
    architecture: str
    options: Dict[str, Any]
    def stats(self) -> Dict[str, int]: ...
    def metrics_text(self) -> str: ...
    def encode(self, text: str) -> List[int]: ...
    tokenizer: Optional[Tokenizer]
    def replay(self, fingerprint_json: str) -> ReplayReport: ...
    @overload
    def verify(self, transcript: str) -> VerifyResult: ...
    @overload
    def verify(self, transcript: Iterable[str]) -> List[VerifyResult]: ...
    def close(self) -> None: ...
    closed: bool
