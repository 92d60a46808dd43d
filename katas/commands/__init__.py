"""The `kata` subcommands."""
