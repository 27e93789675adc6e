"""``--plot FILE`` for the profiling commands: a chart format matplotlib can write, and never
over a file that exists unless ``--force`` says so (an agent could otherwise overwrite any
file in the workspace by naming it)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from journal_agent.errors import UserError
from profiling import time_bound

# What matplotlib's savefig writes (checked without importing matplotlib).
PLOT_FORMATS = ("png", "svg", "pdf", "jpg", "jpeg", "webp", "eps", "ps", "tif", "tiff")

ForceOption = Annotated[
    bool, typer.Option("--force", help="Let --plot overwrite a file that already exists.")
]


def check_plot(plot: Path | None, force: bool) -> None:
    """Raise :class:`UserError` for an unknown chart format or an existing file without force."""
    if plot is None:
        return
    ext = plot.suffix.lower().lstrip(".")
    if ext not in PLOT_FORMATS:
        shown = f"'.{ext}'" if ext else "no extension"
        raise UserError(
            f"--plot {plot} has {shown}; give a chart file ending in "
            f"{', '.join('.' + f for f in PLOT_FORMATS[:4])} (or .{', .'.join(PLOT_FORMATS[4:])})."
        )
    check_new_file("--plot", plot, force)


# A profile that runs longer than a week is a mistake (and `inf` overflows the timer).
MAX_TIMEOUT_S = time_bound.MAX_TIMEOUT_S


def check_new_file(flag: str, path: Path | None, force: bool) -> None:
    """Raise :class:`UserError` for a file to write that exists (without ``force``), is not
    a regular file, or lies in a directory that is not there."""
    if path is None:
        return
    if path.exists() and not force:
        raise UserError(f"{flag} {path} already exists; pass --force to overwrite it.")
    if path.exists() and not path.is_file():
        raise UserError(f"{flag} {path} is not a regular file; give a new file name.")
    if not path.parent.is_dir():
        raise UserError(f"{flag} {path}: the directory {path.parent} does not exist.")


SnapshotOption = Annotated[
    Path | None,
    typer.Option(
        "--snapshot",
        help="Also write a memory snapshot (the pickle torch.cuda.memory._dump_snapshot writes) "
        "for https://pytorch.org/memory_viz.",
        show_default=False,
    ),
]


def check_snapshot(path: Path | None, force: bool) -> None:
    """Raise :class:`UserError` for a snapshot file that exists (without ``--force``)."""
    if path is None:
        return
    if path.exists() and not force:
        raise UserError(f"--snapshot {path} already exists; pass --force to overwrite it.")
    if path.exists() and not path.is_file():
        raise UserError(f"--snapshot {path} is not a regular file; give a new file name.")
    if not path.parent.is_dir():
        raise UserError(f"--snapshot {path}: the directory {path.parent} does not exist.")
