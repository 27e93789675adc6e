"""Reading a recipe file as data, never as code: YAML (safe loader), JSON, TOML, and the Hugging
Face Trainer's ``training_args.bin`` (a pickle) without running anything it names.

Every file is read at most :data:`MAX_BYTES` (a recipe is a few KB), without following a FIFO
into a blocking read; anything else — too big, not UTF-8, malformed, nested too deep — is one
sentence naming the file.

``training_args.bin`` is ``torch.save(TrainingArguments)``: a zip holding ``data.pkl`` (or, from
old torches, a bare pickle). Unpickling it normally imports and calls whatever classes it names,
so a file from elsewhere could run code. :func:`read_pickled_args` walks the pickle with an
``Unpickler`` whose ``find_class`` returns an inert stand-in for every name — nothing is
imported, nothing the file names is called — and keeps the attributes ``BUILD`` would have set,
which are the arguments. Tensors (persistent ids) are refused: arguments hold none.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import stat
import tomllib
import zipfile
from pathlib import Path
from typing import Any

from profiling.errors import ProfilingError

MAX_BYTES = 1 << 20  # 1 MiB: a recipe or training_args.bin is a few KB


def read_bytes(path: Path) -> bytes:
    """At most MAX_BYTES of a regular file; one sentence for anything else."""
    try:
        info = path.stat()
    except OSError as exc:
        raise ProfilingError(
            f"--from {path}: cannot read it ({exc.strerror}); check the path"
        ) from None
    if stat.S_ISDIR(info.st_mode):
        raise ProfilingError(f"--from {path} is a folder; give a recipe file inside it")
    if not stat.S_ISREG(info.st_mode):
        raise ProfilingError(f"--from {path} is not a regular file; give a recipe file")
    try:
        # O_NONBLOCK: a FIFO swapped in since the check cannot block the read.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ProfilingError(
            f"--from {path}: cannot read it ({exc.strerror}); check the file"
        ) from None
    if len(raw) > MAX_BYTES:
        raise ProfilingError(
            f"--from {path} is over {MAX_BYTES:,} bytes, not a training recipe (a few KB)"
        )
    return raw


def _text(path: Path) -> str:
    try:
        return read_bytes(path).decode("utf-8")
    except UnicodeDecodeError:
        raise ProfilingError(f"--from {path} is not UTF-8 text; give the recipe file") from None


def read_data(path: Path) -> dict[str, Any]:
    """The file's top-level table, by its kind: .yaml/.yml, .json, .toml, or a pickled
    ``training_args.bin``."""
    suffix = path.suffix.lower()
    if suffix == ".bin":
        return read_pickled_args(path)
    text = _text(path)
    try:
        if suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        elif suffix == ".toml":
            data = tomllib.loads(text)
        elif suffix == ".json":
            data = json.loads(text)
        else:
            raise ProfilingError(
                f"--from {path}: a recipe is a .yaml, .json, .toml or training_args.bin file"
            )
    except ProfilingError:
        raise
    except RecursionError:
        raise ProfilingError(f"--from {path} nests too deep to be a recipe") from None
    except Exception as exc:  # yaml.YAMLError, JSONDecodeError, TOMLDecodeError, big numbers
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ProfilingError(f"--from {path} cannot be read as {suffix[1:]} ({first})") from None
    if not isinstance(data, dict):
        raise ProfilingError(f"--from {path} holds no table of settings; give a recipe file")
    return data


# --------------------------------------------------------------------- training_args.bin


class _Inert:
    """What every class a pickle names becomes (a fresh subclass per name): made, it keeps its
    arguments; built, its state. Nothing of the named class runs."""

    name = "object"
    args: tuple[Any, ...] = ()
    state: Any = None

    def __new__(cls, *args: Any, **kwargs: Any) -> _Inert:
        self = object.__new__(cls)
        self.args = args
        self.state = None
        return self

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        self.state = state


class _SafeUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module == "copyreg" and name == "_reconstructor":
            return _reconstructor  # object.__reduce_ex__(<2)'s helper: build without running
        if module == "builtins" and name in _CONTAINERS:
            return _CONTAINERS[name]
        return type(name, (_Inert,), {"name": f"{module}.{name}"})

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("it holds tensors")


_CONTAINERS: dict[str, type] = {
    "set": set, "frozenset": frozenset, "tuple": tuple, "list": list, "dict": dict,
}  # fmt: skip


def _reconstructor(cls: Any, base: Any, state: Any) -> _Inert:
    return type("object", (_Inert,), {"name": getattr(cls, "name", "object")})()


def _plain(value: Any, depth: int = 0) -> Any:
    """Stand-ins as plain data: an enum member as its value, an object as its attributes."""
    if depth > 20:
        return None
    if isinstance(value, _Inert):
        if isinstance(value.state, dict):
            return {str(k): _plain(v, depth + 1) for k, v in value.state.items()}
        if value.args:  # an Enum member: Class(value)
            return _plain(value.args[0], depth + 1)
        return value.name
    if isinstance(value, type) and issubclass(value, _Inert):
        return value.name
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v, depth + 1) for v in value]
    return value


def read_pickled_args(path: Path) -> dict[str, Any]:
    """``training_args.bin``'s arguments, read without importing or calling anything."""
    raw = read_bytes(path)
    payload = raw
    if raw[:4] == b"PK\x03\x04":  # torch.save's zip: <name>/data.pkl
        try:
            with zipfile.ZipFile(io.BytesIO(raw)) as zf:
                pkl = [n for n in zf.namelist() if n.endswith("data.pkl")]
                if not pkl or zf.getinfo(pkl[0]).file_size > MAX_BYTES:
                    raise ProfilingError(
                        f"--from {path} is a zip without a small data.pkl; not training_args.bin"
                    )
                payload = zf.read(pkl[0])
        except zipfile.BadZipFile:
            raise ProfilingError(f"--from {path} is a damaged zip; not training_args.bin") from None
    try:
        obj = _SafeUnpickler(io.BytesIO(payload)).load()
    except ProfilingError:
        raise
    except Exception as exc:
        raise ProfilingError(
            f"--from {path} cannot be read as the Trainer's pickled arguments ({exc}); give "
            "its args as JSON (TrainingArguments.to_json_string())"
        ) from None
    data = _plain(obj)
    if not isinstance(data, dict) or not data:
        raise ProfilingError(f"--from {path} holds no training arguments")
    return data


__all__ = ["MAX_BYTES", "read_bytes", "read_data", "read_pickled_args"]
