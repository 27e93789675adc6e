#!/bin/sh
# journal-agent's hook entry (hooks.json runs `/bin/sh capture.sh EVENT`): capture.py with the
# python3 on PATH, as `python3 -I -S` (standard library only). Without any python3 it stays
# silent (Claude Code would show "hook error" at every prompt and turn) and leaves a note in
# the plugin's data folder, which `journal-agent doctor` reads and names.
#
# An event with nothing to do in this project starts no Python (an interpreter start is ~10 ms
# of CPU and, on a busy machine, the wait for a core): UserPromptSubmit's recall reads the
# search index, and SessionEnd moves only what the session left under .journal/. Each test
# below is true wherever Python would find something (a link there is Python's to refuse, and
# without CLAUDE_PROJECT_DIR the payload's cwd decides, which only Python reads).
journal=${CLAUDE_PROJECT_DIR:+$CLAUDE_PROJECT_DIR/.journal}
case ${journal:+$1} in
  UserPromptSubmit)
    [ -e "$journal/index.sqlite" ] || [ -L "$journal/index.sqlite" ] || [ -L "$journal" ] || exit 0 ;;
  SessionEnd)
    [ -e "$journal" ] || [ -L "$journal" ] || exit 0 ;;
esac
if command -v python3 >/dev/null 2>&1; then
  exec python3 -I -S "${0%/*}/capture.py" "$@"
fi
if [ -n "${CLAUDE_PLUGIN_DATA:-}" ] && [ -d "$CLAUDE_PLUGIN_DATA" ]; then  # Claude Code made it
  printf "no python3 on the PATH Claude Code runs the hooks with: %s\n" "$PATH" \
    >"$CLAUDE_PLUGIN_DATA/hooks-no-python3" 2>/dev/null
fi
exit 0
