"""Placeholder: `agents` and `commands` listing (foundation)."""
