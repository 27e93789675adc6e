"""``journal-agent journal …``: append, check, list, show, refresh, search, repair, related.

Module level stays light (typer only): the journal modules are imported inside the commands.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from journal_agent.cli._app import app
from journal_agent.cli._common import (
    JsonOption,
    RootOption,
    echo,
    open_workspace,
    print_json,
    print_json_list,
)
from journal_agent.errors import UserError

journal_app = typer.Typer(
    help="The learning journal: append verified entries, check them, search and navigate.",
    no_args_is_help=True,
)
app.add_typer(journal_app, name="journal")

FileOption = Annotated[
    Path | None,
    typer.Option(
        "--file", "-f", help="Read the entry from this markdown file.", show_default=False
    ),
]
StdinArg = Annotated[
    str | None,
    typer.Argument(help="'-' to read the entry from standard input.", show_default=False),
]


def _read_source(file: Path | None, source: str | None) -> str:
    if file is not None and source is not None:
        raise UserError("give either --file ENTRY.md or '-' (standard input), not both.")
    if file is not None:
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise UserError(f"cannot read {file}: {exc.strerror}; check the path.") from None
        label = str(file)
    elif source == "-":
        data = sys.stdin.buffer.read()
        label = "standard input"
    else:
        raise UserError("give the entry with --file ENTRY.md, or '-' to read standard input.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{label} is not valid UTF-8 (byte {exc.start}); save it as UTF-8 and try again."
        ) from None


def _problem_lines(problems: list, where: str) -> list[str]:
    out = []
    for p in problems:
        at = f"{where}:{p.line}  " if p.line else ""
        out.append(f"  {at}{p.kind:<16} {p.detail}")
        out += [f"      {line}" for line in getattr(p, "diff", None) or []]
    return out


@journal_app.command("append")
def journal_append_command(
    source: StdinArg = None,
    file: FileOption = None,
    force: Annotated[
        bool, typer.Option("--force", help="Append even with problems (they are recorded).")
    ] = False,
    json_out: JsonOption = False,
    root: RootOption = None,
) -> None:
    """Validate an entry and append it to learning_journal.md (atomically, under a lock).

    An entry that repeats one already in the journal (same concept, near-identical content)
    is refused with that entry's title; update it instead, or --force to keep both."""
    from journal_agent.journal import api

    ws = open_workspace(root)
    text = _read_source(file, source)
    outcome = api.append_entry(ws, text, force=force)
    if json_out:
        print_json(outcome.to_dict())
    elif outcome.appended:
        suffix = (
            f" with {len(outcome.problems)} problem(s) recorded (see `journal-agent journal check`)"
            if outcome.forced
            else ""
        )
        echo(f"appended {outcome.entry_id} at learning_journal.md:{outcome.line}{suffix}")
        for warning in outcome.warnings:
            echo(f"warning: {warning}", err=True)
    else:
        where = str(file) if file else "entry"
        echo(
            f"entry not appended: {len(outcome.problems)} problem(s) to fix "
            "(or use --force to append anyway):",
            err=True,
        )
        for line in _problem_lines(outcome.problems, where):
            echo(line, err=True)
    if not outcome.appended:
        raise typer.Exit(1)


@journal_app.command("check")
def journal_check_command(
    fix: Annotated[
        bool,
        typer.Option(
            "--fix",
            help="First rewrite the references whose lines moved to where they are now "
            "(never those whose lines changed).",
        ),
    ] = False,
    json_out: JsonOption = False,
    root: RootOption = None,
) -> None:
    """Verify references, citations, numbers, required sections and encoding of every entry."""
    from journal_agent.journal import api

    ws = open_workspace(root)
    fixed = api.fix_refs(ws).fixed if fix else []
    report = api.check(ws)
    if not json_out and not ws.journal.exists():
        echo("no learning_journal.md here yet: nothing to check")
        return
    if json_out:
        print_json({**report.to_dict(), **({"fixed": [f.to_dict() for f in fixed]} if fix else {})})
    else:
        for f in fixed:
            echo(f"fixed learning_journal.md:{f.line}  {f.old} → {f.new}  ({f.entry})")
        _print_report(report)
    if not report.ok:
        raise typer.Exit(1)


def _print_report(report) -> None:
    by_entry: dict[str, list] = {}
    for p in report.problems:
        by_entry.setdefault(p.entry, []).append(p)
    for p_entry in [e for e in by_entry if e not in {x["id"] for x in report.entries}]:
        echo(f"✗ {p_entry}")
        for line in _problem_lines(by_entry[p_entry], "learning_journal.md"):
            echo(line)
    for entry in report.entries:
        problems = by_entry.get(entry["id"], [])
        mark = "✓" if not problems else "✗"
        echo(f"{mark} {entry['id']}  ({entry['date']}, line {entry['line']})")
        for line in _problem_lines(problems, "learning_journal.md"):
            echo(line)
    n, count = len(report.problems), len(report.entries)
    echo(
        f"{count} entr{'y' if count == 1 else 'ies'}, {n} problem{'s' if n != 1 else ''}"
        + ("" if n else " — all references, citations and sections check out")
    )


@journal_app.command("list")
def journal_list_command(
    tag: Annotated[
        list[str] | None, typer.Option("--tag", "-t", help="Only entries with this tag.")
    ] = None,
    json_out: JsonOption = False,
    root: RootOption = None,
) -> None:
    """List the entries: number, date, id, title and tags."""
    from journal_agent.journal import api

    wanted = {t.lstrip("#").lower() for t in tag or []}
    # An entry at a time (a 100 MB journal read whole took 1.2 GB); each row said as it comes.
    with api.open_journal(open_workspace(root)) as journal:
        rows = (
            (n, e.summary())
            for n, e in enumerate(journal.entries(), start=1)
            if wanted <= set(e.tags)
        )
        if json_out:
            print_json_list({"number": n, **summary} for n, summary in rows)
            return
        shown = 0
        for n, e in rows:
            tags = " ".join(f"#{t}" for t in e["tags"])
            echo(f"{n:>4}  {e['date']}  {e['title']}  [{e['id']}]  {tags}".rstrip())
            shown += 1
    if not shown:
        echo("no entries" + (" with those tags" if wanted else " yet"))


@journal_app.command("show")
def journal_show_command(
    entry: Annotated[str, typer.Argument(help="Entry id, number (from `list`) or title words.")],
    json_out: JsonOption = False,
    root: RootOption = None,
) -> None:
    """Print one entry exactly as it is in the journal, then the entries that link to it."""
    from journal_agent.journal import api

    ws = open_workspace(root)
    with api.open_journal(ws) as journal:
        found = journal.find(entry)
    if found is None:
        raise UserError(
            f"no single entry matches {entry!r}; use an id or number from "
            "`journal-agent journal list`."
        )
    links = api.backlinks(ws, found.id)
    if json_out:
        print_json({**found.summary(), "text": found.raw, "backlinks": links})
        return
    echo(found.raw, nl=False)
    if links:
        echo("\n← linked from (🔗 Related Concepts of):")
        for link in links:
            echo(f"- **{link['title']}** ({link['date']}) — entry `{link['id']}`")


@journal_app.command("refresh")
def journal_refresh_command(
    entry: Annotated[str, typer.Argument(help="Entry id, number (from `list`) or title words.")],
    accept: Annotated[
        list[str] | None,
        typer.Option(
            "--accept",
            help="A reference (path:N-M, as written in the entry) whose lines changed and that "
            "the entry now describes as they are; repeat for each.",
        ),
    ] = None,
    json_out: JsonOption = False,
    root: RootOption = None,
) -> None:
    """After updating an entry for changed code: record its references' current content."""
    from journal_agent.journal import api

    done = api.refresh_refs(open_workspace(root), entry, accept or [])
    if json_out:
        print_json({"entry": done.entry, "refs": sorted(done.anchors), "skipped": done.skipped})
        return
    refs = ", ".join(sorted(done.anchors)) or "none"
    echo(
        f"recorded the current content of {len(done.anchors)} reference(s) of {done.entry}: {refs}"
    )
    for why in done.skipped.values():
        echo(f"not recorded: {why}", err=True)


@journal_app.command("search")
def journal_search_command(
    query: Annotated[
        list[str], typer.Argument(help="Words (FTS5 syntax allowed) and #tags to filter by.")
    ],
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many hits.")] = 10,
    json_out: JsonOption = False,
    root: RootOption = None,
) -> None:
    """Search by words (stems, synonyms, typos, Chinese) and meaning; `#tag` words filter."""
    from journal_agent.journal import api
    from journal_agent.journal.limits import check_query

    ws = open_workspace(root)
    tags = [w for w in query if w.startswith("#") and len(w) > 1]
    words = " ".join(w for w in query if w not in tags)
    check_query(words)
    hits, note = api.search_with_note(ws, words, tags, limit)
    if note:
        echo(f"note: {note}", err=True)
    if json_out:
        print_json([h.to_dict() for h in hits])
        return
    for h in hits:
        echo(f"{h.date}  {h.title}  [{h.id}]  line {h.line}")
        why = []
        if h.matched:
            why.append("words: " + ", ".join(h.matched))
        if h.meaning is not None and (not h.matched or h.meaning >= 0.45):
            why.append(f"meaning {h.meaning:.2f}")
        if why:
            echo(f"    ({'; '.join(why)})")
        if h.snippet:
            echo(f"    {h.snippet}")
    if not hits:
        echo("no matches")


@journal_app.command("index")
def index_cmd(root: RootOption = None) -> None:
    """Embed every entry that has no vector yet (for search by meaning); prints progress."""
    from journal_agent.journal import api

    def progress(done: int, total: int) -> None:
        echo(f"\rembedded {done}/{total}", nl=False, err=True)

    embedded, total = api.index(open_workspace(root), progress)
    if embedded:
        echo("", err=True)
    echo(f"{total} entries indexed; {embedded} embedded now, the rest were cached")


@journal_app.command("related")
def journal_related_command(
    source: StdinArg = None,
    file: FileOption = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many entries.")] = 5,
    json_out: JsonOption = False,
    root: RootOption = None,
) -> None:
    """Existing entries a draft should link to (words and meaning), for its 🔗 section."""
    from journal_agent.journal import api
    from journal_agent.journal.limits import check_draft

    text = _read_source(file, source)
    check_draft(text)
    hits = api.related(open_workspace(root), text, limit)
    if json_out:
        print_json([h.to_dict() for h in hits])
        return
    for h in hits:
        echo(f"- **{h.title}** ({h.date}) — entry `{h.id}`")
    if not hits:
        echo("no related entries")


@journal_app.command("repair")
def journal_repair_command(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Report what would change; write nothing.")
    ] = False,
    json_out: JsonOption = False,
    root: RootOption = None,
) -> None:
    """Fix invalid UTF-8 and double-encoded text (mojibake), after writing a backup."""
    from journal_agent.journal import api

    outcome = api.repair(open_workspace(root), dry_run=dry_run)
    if json_out:
        print_json(outcome.to_dict())
    else:
        fixed = ", ".join(map(str, outcome.fixed_lines)) or "none"
        if outcome.changed:
            echo(f"backup written to {outcome.backup}")
            echo(f"repaired lines: {fixed}")
        elif dry_run and outcome.fixed_lines:
            echo(f"would repair lines: {fixed} (nothing written)")
        else:
            echo("nothing to repair: the journal is clean UTF-8")
        if outcome.guessed_lines:
            echo(
                ("line " if len(outcome.guessed_lines) == 1 else "lines ")
                + ", ".join(map(str, outcome.guessed_lines))
                + " had a byte lost in the double encoding; it was restored as the only "
                "character the journal format uses that fits there — check them"
            )
        if outcome.unrepaired_lines:
            echo(
                "could not repair lines "
                + ", ".join(map(str, outcome.unrepaired_lines))
                + " (bytes were lost in the double encoding); fix them by hand",
                err=True,
            )
    if outcome.unrepaired_lines:
        raise typer.Exit(1)
