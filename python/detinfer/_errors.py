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


def _subclass(name: str, code: str, value: int, doc: str, *bases: type) -> type:
    return type(name, (Error, *bases), {"code": code, "code_value": value, "__doc__": doc,
                                         "__module__": "detinfer"})


# One row per detinfer::ErrorCode, in code order.
InvalidArgumentError = _subclass("InvalidArgumentError", "invalid_argument", 1,
                                 "A caller-supplied value is out of range or malformed.",
                                 ValueError)
NotFoundError = _subclass("NotFoundError", "not_found", 2,
                          "A file, tensor, token or entry does not exist.", LookupError)
CorruptError = _subclass("CorruptError", "corrupt", 3,
                         "Stored data fails validation (bounds, checksum, format).")
UnsupportedError = _subclass("UnsupportedError", "unsupported", 4,
                             "A valid but unsupported architecture, dtype or component.")
ResourceExhaustedError = _subclass("ResourceExhaustedError", "resource_exhausted", 5,
                                   "A queue, budget or memory limit is full.")
UnavailableError = _subclass("UnavailableError", "unavailable", 6,
                             "A backend or the session is down or closed.")
InternalError = _subclass("InternalError", "internal", 7,
                          "A broken invariant inside detinfer (a bug: please report it).")

_BY_CODE = {
    cls.code_value: cls
    for cls in (InvalidArgumentError, NotFoundError, CorruptError, UnsupportedError,
                ResourceExhaustedError, UnavailableError, InternalError)
}


def _from_code(code: int, message: str, field: str) -> Error:
    """The exception for a detinfer::Error (called by the extension's translator)."""
    return _BY_CODE.get(code, Error)(message, field)
