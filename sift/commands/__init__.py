"""Subcommands of ``sift``: one module each, discovered by :mod:`sift.cli`."""
