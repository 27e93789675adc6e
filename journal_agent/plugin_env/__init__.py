"""The plugin's own environment: where it lives, preparing it, and the programs that run before
it exists (the ``journal-agent`` launcher in the plugin's ``bin/``, the MCP front).

Everything here runs on the standard library alone, from the plugin's files, under whatever
``python3`` Claude Code finds (3.10 or newer): it is what works before any ``pip install``.
``env`` locates and describes the environment, ``build`` prepares it, ``front`` is the MCP
server Claude Code starts, ``launch`` is the ``journal-agent`` command of ``bin/``; ``entry`` is
the script the ``bin/`` files run. docs/plugin.md tells the whole first minute.
"""
