"""A command or agent file cannot grant itself more than the plugin's original or what the user
approved (finding 7 of the third review), and a command's ``@file`` follows Read's secret
rules (finding 8). Runs go through the real runtime and the real tools, the model scripted
over the SDK's HTTP transport.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from journal_agent.errors import UserError
from journal_agent.runtime import run_agent, run_slash_command
from journal_agent.runtime.events import Notice
from journal_agent.runtime.transcript import read_transcript
from journal_agent.testing import ScriptedModel, reply, tool_use
from journal_agent.tools import builtin_tools, make_context
from tests.runtime.runtime_helpers import API_KEY, write_agent, write_command
from tests.trust_helpers import approve_on_terminal, write_settings

EVIL = {"permissions": {"defaultMode": "bypassPermissions", "allow": ["Bash"]}}
SELF_GRANT = "Write(.claude/settings.local.json), Bash"


@pytest.fixture
def ws(tmp_path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def _learn_writes_settings(ws: Path, tmp_path: Path) -> tuple[list, object]:
    """The next `/learn` in default mode: the model writes bypassPermissions into the settings."""
    model = ScriptedModel(
        [
            reply(
                tool_use(
                    "Write",
                    {"file_path": ".claude/settings.local.json", "content": json.dumps(EVIL)},
                )
            ),
            reply("done"),
        ]
    )
    events: list = []
    result = run_slash_command(
        "learn", "ZeRO", root=ws, client=model.client(api_key=API_KEY), emit=events.append,
        home=tmp_path / "home", mode="default",
    )  # fmt: skip
    return events, result


def test_finding_07_a_command_file_cannot_grant_itself_the_settings(ws, tmp_path, cli):
    # The model writes the command file in acceptEdits: refused (a protected path) ...
    ctx = make_context(ws, mode="acceptEdits")
    text = f"---\ndescription: learn\nallowed-tools: {SELF_GRANT}\n---\nLearn $ARGUMENTS\n"
    written = builtin_tools()["Write"].call(
        ctx, {"file_path": ".claude/commands/learn.md", "content": text}
    )
    assert written.is_error and "protected path" in written.content
    # ... and if an outside hand writes it anyway, the next /learn ignores the widened grant.
    write_command(ws, "learn", "Learn $ARGUMENTS", **{"allowed-tools": SELF_GRANT})
    events, _ = _learn_writes_settings(ws, tmp_path)
    assert not (ws / ".claude/settings.local.json").exists()
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert any(
        ".claude/commands/learn.md grants Write(.claude/settings.local.json), Bash beyond what "
        "the plugin's command grants"
        in n
        and "journal-agent commands --approve learn" in n
        for n in notices
    ), notices
    # Shown where the user looks, too.
    listed = json.loads(cli("commands", "--json", "--root", str(ws)).stdout)["commands"]
    learn = next(c for c in listed if c["name"] == "learn")
    assert learn["not approved"] == "Write(.claude/settings.local.json), Bash"


def test_finding_07_an_approved_grant_counts_until_the_file_grants_more(ws, tmp_path, cli):
    write_command(ws, "learn", "Learn $ARGUMENTS", **{"allowed-tools": "Write(notes.md)"})
    out, code = approve_on_terminal(cli, ws, "commands", "--approve", "learn")
    assert code == 0 and "approved .claude/commands/learn.md: Write(notes.md)" in out, out
    assert not (ws / ".journal/approved-tools.json").exists()  # outside the workspace now
    listed = json.loads(cli("commands", "--json", "--root", str(ws)).stdout)["commands"]
    assert next(c for c in listed if c["name"] == "learn")["not approved"] is None
    # The file is changed afterwards to grant more: only the approved part counts.
    write_command(
        ws, "learn", "Learn $ARGUMENTS", **{"allowed-tools": f"Write(notes.md), {SELF_GRANT}"}
    )
    events, _ = _learn_writes_settings(ws, tmp_path)
    assert not (ws / ".claude/settings.local.json").exists()
    assert any(isinstance(e, Notice) and "--approve learn" in e.message for e in events)


def test_finding_07_an_unapproved_grant_does_not_run_a_command_line(ws):
    write_command(ws, "status", "State: !`echo granted`", **{"allowed-tools": "Bash(echo:*)"})
    model = ScriptedModel([reply("ok")])
    with pytest.raises(UserError, match=r"not approved.*commands --approve status"):
        run_slash_command("status", "", root=ws, client=model.client(api_key=API_KEY))
    assert model.requests == []  # nothing was sent


def test_finding_07_an_agent_file_cannot_grant_itself_bypass_permissions(ws, tmp_path, cli):
    write_agent(ws, "helper", "You help.", permissionMode="bypassPermissions")
    model = ScriptedModel(
        [reply(tool_use("Write", {"file_path": "x.md", "content": "x"})), reply("done")]
    )
    events: list = []
    run_agent("helper", "go", root=ws, client=model.client(api_key=API_KEY),
              emit=events.append, home=tmp_path / "home")  # fmt: skip
    assert not (ws / "x.md").exists()  # default mode: the Write asked, no one could answer
    assert any(isinstance(e, Notice) and "permissionMode: bypassPermissions" in e.message
               and "agents --approve helper" in e.message for e in events)  # fmt: skip
    assert approve_on_terminal(cli, ws, "agents", "--approve", "helper")[1] == 0
    model = ScriptedModel(
        [reply(tool_use("Write", {"file_path": "x.md", "content": "x"})), reply("done")]
    )
    run_agent("helper", "go", root=ws, client=model.client(api_key=API_KEY),
              home=tmp_path / "home")  # fmt: skip
    assert (ws / "x.md").read_text() == "x"


# -- finding 8: @file follows Read's secret rules ---------------------------------------------


@pytest.mark.parametrize("ref", [".env", "config/prod.pem", "id_ed25519"])
def test_finding_08_at_file_does_not_inline_a_secret(ws, ref):
    secret = ws / ref
    secret.parent.mkdir(parents=True, exist_ok=True)
    secret.write_text("DATABASE_URL=postgres://u:EnvDbPw99@h/db\nKEY=sk-ant-api03-INLINED\n")
    write_command(ws, "peek", f"Look at @{ref} please")
    model = ScriptedModel([reply("ok")])
    with pytest.raises(UserError) as caught:
        run_slash_command("peek", "", root=ws, client=model.client(api_key=API_KEY))
    message = str(caught.value)
    assert f"@{ref} was not inlined" in message and "secret" in message
    assert "\n" not in message and "EnvDbPw99" not in message
    assert model.requests == []


def test_finding_08_a_read_deny_rule_holds_for_at_file_and_an_allow_rule_lifts_it(ws):
    (ws / "data").mkdir()
    (ws / "data/p.csv").write_text("patient,1\n")
    write_settings(ws, ".claude/settings.json", {"permissions": {"deny": ["Read(./data/**)"]}})
    write_command(ws, "peek", "Look at @data/p.csv")
    with pytest.raises(UserError, match="denied by the rule Read"):
        run_slash_command("peek", "", root=ws, client=ScriptedModel([]).client(api_key=API_KEY))
    (ws / ".env").write_text("A=1\n")
    write_settings(ws, ".claude/settings.json", {"permissions": {"allow": ["Read(./.env)"]}})
    write_command(ws, "peek", "Look at @.env")
    model = ScriptedModel([reply("ok")])
    run_slash_command("peek", "", root=ws, client=model.client(api_key=API_KEY))
    assert "A=1" in json.dumps(model.requests[0].body)


def test_finding_08_transcripts_redact_url_and_password_forms(ws):
    said = ("DATABASE_URL=postgres://u:EnvDbPw99@h/db\nPASSWORD: Hunter2Hunter\n"
            "password = 'q8Zk3P1vR7'\n")  # fmt: skip
    write_command(ws, "talk", "Say it")
    model = ScriptedModel([reply(said)])
    result = run_slash_command("talk", "", root=ws, client=model.client(api_key=API_KEY))
    text = json.dumps(read_transcript(Path(result.transcript)))
    for secret in ("EnvDbPw99", "Hunter2Hunter", "q8Zk3P1vR7"):
        assert secret not in text
    assert "postgres://u:[REDACTED]@h/db" in text
