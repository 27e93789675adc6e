"""The one markdown template tests write journal entries with (the heading, context, question,
intuition and tags an entry of the learning-journal agent has)."""

from __future__ import annotations


def render_entry(
    title: str, date: str, *, context: str, question: str, intuition: str, tags: str, body: str = ""
) -> str:
    """An entry as the agent writes it; ``body`` goes after the intuition (more sections)."""
    return (
        f"## {title} ({date})\n"
        "\n"
        f"**Context**: {context}\n"
        "\n"
        f"**The Key Question I Had**: *{question}*\n"
        "\n"
        "### 🎯 Intuition\n"
        f"{intuition}\n"
        f"{body}"
        "\n"
        "### 🏷️ Tags\n"
        f"{tags}\n"
    )
