"""The mutation engine: find where a bug fits a script's structure and plant it there."""
