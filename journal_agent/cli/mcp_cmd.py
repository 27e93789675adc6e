"""Placeholder: commands are registered here by the module's owner."""
