"""detinfer.Error and one subclass per detinfer::ErrorCode (include/detinfer/error.h).

Every failure of the C++ library reaches Python as one of these, with the code's stable
name in ``code``, its number in ``code_value``, the message without the code prefix in
``message`` and the offending input (e.g. ``"temperature"``, ``"messages[2].role"``) in
``field`` ("" when no single field is at fault).
"""


class Error(Exception):
    """Base class of every detinfer error."""

    code = "unknown"
    code_value = 0

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(f"{self.code}: {message}")
        self.message = message
        self.field = field


class InvalidArgumentError(Error, ValueError):
    """A caller-supplied value is out of range or malformed."""

    code = "invalid_argument"
    code_value = 1


class NotFoundError(Error, LookupError):
    """A file, tensor, token or entry does not exist."""

    code = "not_found"
    code_value = 2


class CorruptError(Error):
    """Stored data fails validation (bounds, checksum, format)."""

    code = "corrupt"
    code_value = 3


class UnsupportedError(Error):
    """A valid but unsupported architecture, dtype or component."""

    code = "unsupported"
    code_value = 4


class ResourceExhaustedError(Error):
    """A queue, budget or memory limit is full."""

    code = "resource_exhausted"
    code_value = 5


class UnavailableError(Error):
    """A backend or the session is down or closed."""

    code = "unavailable"
    code_value = 6


class InternalError(Error):
    """A broken invariant inside detinfer (a bug: please report it)."""

    code = "internal"
    code_value = 7


_BY_CODE = {
    cls.code_value: cls
    for cls in (
        InvalidArgumentError,
        NotFoundError,
        CorruptError,
        UnsupportedError,
        ResourceExhaustedError,
        UnavailableError,
        InternalError,
    )
}


def _from_code(code: int, message: str, field: str) -> Error:
    """The exception for a detinfer::Error (called by the extension's translator)."""
    return _BY_CODE.get(code, Error)(message, field)
