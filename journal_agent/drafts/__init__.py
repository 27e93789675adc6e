"""``inbox draft``: entries the learning-journal agent drafts from captured moments, over the
Messages API, into ``.journal/drafts/`` for the user to accept — never into the journal unasked.

- :mod:`journal_agent.capture.drafts` (below this room, so the web view can list, accept and
  reject drafts without importing what starts a run): a draft on disk (which moments it came
  from), listing, accepting (through the journal's one append path) and rejecting;
- :mod:`journal_agent.drafts.caps`: the switch, the per-draft and daily token caps and the
  day's count of tokens spent;
- :mod:`journal_agent.drafts.tools`: the tools a drafting run gets — JournalAppend, Write and
  Edit routed so that nothing but a draft is written;
- :mod:`journal_agent.drafts.run`: one run of the agent per moment, through our runtime.

Only the CLI imports this room; it imports the runtime, the tools, capture and the journal.
"""
