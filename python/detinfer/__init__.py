"""detinfer: bitwise-reproducible LLM inference (docs/python.md).

    import detinfer
    with detinfer.Session("tiny-model", threads=2) as s:
        r = s.generate("Hello", max_new_tokens=8, seed=1)
        print(r.text, r.finish_reason, r.digest_hex)

Session options are the SessionOptions keywords (SESSION_OPTIONS); generation options
are the GenerationConfig fields (GENERATION_FIELDS). Errors are detinfer.Error
subclasses carrying .code and .field.
"""

from ._errors import (
    CorruptError,
    Error,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
    UnavailableError,
    UnsupportedError,
)
from ._detinfer import (
    GENERATION_FIELDS,
    SESSION_OPTIONS,
    CacheUsage,
    FingerprintDiff,
    GenerationResult,
    ReplayReport,
    Sequence,
    StepLogprobs,
    Stream,
    Timings,
    TokenDelta,
    Tokenizer,
    TokenLogprob,
    VerifyDivergence,
    VerifyResult,
    __version__,
    diff,
)
from ._session import Future, Session, logits

__all__ = [
    "CacheUsage",
    "CorruptError",
    "Error",
    "FingerprintDiff",
    "Future",
    "GENERATION_FIELDS",
    "GenerationResult",
    "InternalError",
    "InvalidArgumentError",
    "NotFoundError",
    "ReplayReport",
    "ResourceExhaustedError",
    "SESSION_OPTIONS",
    "Sequence",
    "Session",
    "StepLogprobs",
    "Stream",
    "Timings",
    "TokenDelta",
    "TokenLogprob",
    "Tokenizer",
    "UnavailableError",
    "UnsupportedError",
    "VerifyDivergence",
    "VerifyResult",
    "diff",
    "logits",
]
