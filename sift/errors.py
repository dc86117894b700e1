"""The root of sift's exceptions.

Each subpackage defines its own errors under :class:`SiftError`, so a caller can
catch everything sift raises with one ``except`` and the command line can turn
any of them into a one-line message.
"""


class SiftError(Exception):
    """Base class of every error sift raises on purpose."""


class ConfigError(SiftError):
    """A setting or command-line option has a value sift cannot use."""
