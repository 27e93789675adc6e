#!/bin/sh
# journal-agent's MCP server where no Python can run it: `sh degraded.sh REASON`, started by
# bin/journal-agent (no python3 at all) or by entry.py (only Pythons too old). Claude Code would
# record a server that exits as failed and skip it, with no word to the model; this one answers
# instead, offering one tool, JournalAgentStatus, whose answer (and the server's instructions)
# is REASON: what is missing and the step that fixes it. `journal-agent doctor` reads the note
# it leaves in the plugin's data folder.
#
# POSIX sh builtins only (the PATH may hold nothing else): a line-at-a-time JSON-RPC loop that
# reads the top-level "id" and "method" of each message with a small scanner that knows
# strings, escapes and nesting, so an "id" inside the parameters is never taken for the
# message's own.

reason=$1

# The JSON string literal of $1.
json_string() {
  _in=$1 _out=
  while [ -n "$_in" ]; do
    _plain=${_in%%[\"\\]*}
    _out=$_out$_plain
    _in=${_in#"$_plain"}
    [ -z "$_in" ] && break
    _out="$_out\\${_in%"${_in#?}"}"  # the quote or backslash, escaped
    _in=${_in#?}
  done
  printf '"%s"' "$_out"
}

# The raw JSON value of key $1 in the outermost object of the JSON text $2 ("" when absent).
json_top() {
  _key=\"$1\" _s=$2 _depth=0 _last= _grab= _value= _expect_value=
  while [ -n "$_s" ]; do
    _pre=${_s%%[]\"\{\}[:,]*}
    _s=${_s#"$_pre"}
    [ -n "$_grab" ] && _value=$_value$_pre
    [ -z "$_s" ] && break
    _c=${_s%"${_s#?}"}
    _s=${_s#?}
    if [ "$_c" = '"' ]; then  # a whole string: up to its closing quote, escapes skipped
      _str=\"
      while :; do
        _part=${_s%%[\"\\]*}
        _str=$_str$_part
        _s=${_s#"$_part"}
        [ -z "$_s" ] && break
        _q=${_s%"${_s#?}"}
        _s=${_s#?}
        if [ "$_q" = '"' ]; then
          _str=$_str\"
          break
        fi
        _str=$_str\\${_s%"${_s#?}"}
        _s=${_s#?}
      done
      [ -n "$_grab" ] && _value=$_value$_str
      _last=$_str
      continue
    fi
    case $_c in
      '{' | '[')
        _depth=$((_depth + 1))
        [ -n "$_grab" ] && _value=$_value$_c ;;
      '}' | ']')
        _depth=$((_depth - 1))
        if [ -n "$_grab" ] && [ "$_depth" -lt 1 ]; then
          break
        fi
        [ -n "$_grab" ] && _value=$_value$_c ;;
      ':')
        if [ "$_depth" -eq 1 ] && [ "$_last" = "$_key" ]; then
          _grab=1 _value=
          continue
        fi
        [ -n "$_grab" ] && _value=$_value$_c ;;
      ',')
        if [ -n "$_grab" ] && [ "$_depth" -eq 1 ]; then
          break
        fi
        [ -n "$_grab" ] && _value=$_value$_c ;;
    esac
  done
  [ -z "$_grab" ] && return
  _value=${_value#"${_value%%[! 	]*}"}  # (the blanks around it)
  printf '%s' "${_value%"${_value##*[! 	]}"}"
}

# A note for `journal-agent doctor`, in the data folder Claude Code gives the plugin.
if [ -n "${CLAUDE_PLUGIN_DATA:-}" ] && [ -d "$CLAUDE_PLUGIN_DATA" ]; then
  printf '%s\n' "$reason" >"$CLAUDE_PLUGIN_DATA/mcp-degraded" 2>/dev/null
fi

text=$(json_string "$reason")
status_tool='{"name":"JournalAgentStatus","description":"Why journal-agent'"'"'s tools are unavailable here and the one step that fixes it: call this to tell the user.","inputSchema":{"type":"object","properties":{}}}'
while IFS= read -r line || [ -n "$line" ]; do
  id=$(json_top id "$line")
  [ -z "$id" ] && continue  # a notification (or a response): nothing to answer
  method=$(json_top method "$line")
  case $method in
    '"initialize"')
      asked=$(json_top protocolVersion "$(json_top params "$line")")
      result='{"protocolVersion":'${asked:-'"2025-06-18"'}',"capabilities":{"tools":{}},"serverInfo":{"name":"journal","version":"unavailable"},"instructions":'$text'}' ;;
    '"ping"') result='{}' ;;
    '"tools/list"') result='{"tools":['$status_tool']}' ;;
    '"tools/call"') result='{"content":[{"type":"text","text":'$text'}],"isError":true}' ;;
    *)
      printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}\n' "$id"
      continue ;;
  esac
  printf '{"jsonrpc":"2.0","id":%s,"result":%s}\n' "$id" "$result"
done
