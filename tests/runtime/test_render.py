"""What the terminal shows: live lines per tool call on a terminal, plain lines elsewhere."""

from __future__ import annotations

import io

from rich.console import Console

from journal_agent.runtime.render import Renderer, summary_lines
from journal_agent.testing import ScriptedModel, reply, tool_use
from tests.runtime.runtime_helpers import Rendezvous, WriteNote, make_loop


def _run(tmp_path, terminal: bool) -> tuple[str, object]:
    out = io.StringIO()
    console = Console(file=out, force_terminal=terminal, width=120, color_system=None)
    renderer = Renderer(console)
    model = ScriptedModel(
        [
            reply(
                "Two at once.",
                tool_use("Rendezvous", {"label": "a"}),
                tool_use("Rendezvous", {"label": "b"}),
                tool_use("WriteNote", {"path": "n.md", "text": "x"}),
            ),
            reply("Done."),
        ]
    )
    loop = make_loop(model, tmp_path, [Rendezvous(2), WriteNote()], transcript=False)
    loop.session.emit = renderer
    result = loop.run("go")
    renderer.close()
    return out.getvalue(), result


def test_plain_output_has_a_line_when_each_call_starts_and_finishes(tmp_path):
    text, _ = _run(tmp_path, terminal=False)
    assert text.count('⏺ Rendezvous(label="a")') == 1
    assert text.count("✓ Rendezvous") == 2 and "✓ WriteNote" in text
    assert "turn 1 · claude-sonnet-5-5" in text and "✻ Two at once." in text


def test_terminal_output_keeps_one_finished_line_per_call(tmp_path):
    text, result = _run(tmp_path, terminal=True)
    assert result.ok
    # each call ends as one permanent line with its input; the live lines are transient
    assert 'Rendezvous(label="a")' in text and 'Rendezvous(label="b")' in text
    assert "✓ WriteNote(path=n.md" in text


def test_summary_lines_say_turns_tools_tokens_cost_files(tmp_path):
    _, result = _run(tmp_path, terminal=False)
    result.files_changed = ["n.md"]
    lines = "\n".join(summary_lines(result))
    assert "completed[/] · 2 turns" in lines
    assert "Rendezvous×2, WriteNote×1" in lines
    assert "tokens:" in lines and "cost $" in lines and "files changed: n.md" in lines
