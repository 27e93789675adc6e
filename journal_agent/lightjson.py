"""JSON for the Claude Code hooks: the standard library's own C scanner and encoder, without
the ``json`` package's import cost.

``import json`` imports ``re`` (and with it ``enum``, ``functools``, the regex compiler) for a
few module-level patterns: about 9 ms of CPU, more than the rest of a hook's work. The parsing
and encoding themselves are done by the C accelerator ``_json`` either way; this module calls it
directly, with the settings ``json.loads`` / ``json.dumps`` use by default, and falls back to the
``json`` package on an interpreter without it. The results are the same as ``json``'s,
errors included (tests/foundation/test_lightjson.py compares them).

Stdlib only; used by the modules the hooks import (journal_agent/capture/, jsonl, atomic).
"""

from __future__ import annotations

TYPE_CHECKING = False  # (typing is an import of its own)
if TYPE_CHECKING:
    from typing import NoReturn

_WHITESPACE = " \t\n\r"  # what json.loads skips around a document


def _c_json() -> tuple[object, object, object] | None:
    """(scanner, compact encoder, sorted-keys encoder) from ``_json``, or None."""
    try:
        import _json
    except ImportError:
        return None

    # The attributes json.JSONDecoder gives the C scanner, at json.loads's defaults ("NaN",
    # "Infinity" and "-Infinity" are read by float, as json.loads reads them).
    defaults = {"strict": True, "object_hook": None, "object_pairs_hook": None}
    defaults |= {"parse_float": float, "parse_int": int, "parse_constant": float}
    context = type("JSONDecoderDefaults", (), defaults)()

    def encoder(sort_keys: bool) -> object:
        return _json.make_encoder(
            {}, _unserializable, _json.encode_basestring, None, ": ", ", ", sort_keys, False, True
        )

    try:
        scanner = _json.make_scanner(context)  # type: ignore[arg-type]  # duck-typed: a decoder
        return scanner, encoder(False), encoder(True)
    except (AttributeError, TypeError):  # another interpreter's _json
        return None


def _unserializable(obj: object) -> object:
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


_C = _c_json()


def loads(data: str | bytes) -> object:
    """``json.loads(data)`` (bytes as UTF-8); ValueError (json's JSONDecodeError, or
    UnicodeDecodeError) when ``data`` is not one JSON value."""
    if _C is None:
        import json

        return json.loads(data)
    if isinstance(data, bytes | bytearray):  # json's handling of UTF-8 bytes, BOM and all
        text = data.decode("utf-8-sig", "surrogatepass")
    else:
        text = data
        if text.startswith("\ufeff"):
            _fail("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        value, end = _scan(text, start)
    except SystemError:
        # Python 3.10 and 3.11: the C scanner raises a malformed document's error as
        # json.decoder.JSONDecodeError, which it looks up in sys.modules without importing it;
        # before anyone imported json it returns NULL with no exception set (SystemError). With
        # json.decoder loaded (bad input only pays its import) the scan raises json's own error.
        import json.decoder

        value, end = _scan(text, start)
    rest = text[end:]
    extra = rest.lstrip(_WHITESPACE)
    if extra:
        _fail("Extra data", text, end + len(rest) - len(extra))
    return value


def _scan(text: str, start: int) -> tuple[object, int]:
    """The C scanner's value at ``start`` and where it ends; json's error where there is none."""
    try:
        return _C[0](text, start)  # type: ignore[operator,index]  # the C scanner
    except StopIteration as stop:
        _fail("Expecting value", text, stop.value)


def _fail(message: str, text: str, at: int) -> NoReturn:
    """Raise json's own error, as json.loads would (its import is paid for bad input only)."""
    from json import JSONDecodeError

    raise JSONDecodeError(message, text, at) from None


def dumps(obj: object, *, sort_keys: bool = False) -> str:
    """``json.dumps(obj, ensure_ascii=False, sort_keys=sort_keys)``: one line, UTF-8 kept."""
    if _C is None:
        import json

        return json.dumps(obj, ensure_ascii=False, sort_keys=sort_keys)
    return "".join(_C[2 if sort_keys else 1](obj, 0))  # type: ignore[operator]  # C encoder
