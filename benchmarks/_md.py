"""The markdown table the GPU scripts write beside their JSON (gpu_check, hf_peft_gpu).

Standard library only: on a lent GPU machine these scripts run from a bare checkout, and
each imports this file from its own folder (``sys.path[0]``), nothing of the package.
"""

from __future__ import annotations


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Header, rule and rows; a short row (a case that failed) is padded with empty cells."""
    width = len(header)
    return [_line(header), _line(["---"] * width)] + [
        _line(row + [""] * (width - len(row))) for row in rows
    ]


def _line(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"
