"""Errors of the learning core."""

from sift.errors import SiftError


class FilterError(SiftError):
    """A learning-core call received something it cannot use."""


class ParameterError(FilterError, ValueError):
    """A hyperparameter has a value outside its domain; the message names both."""


class StateError(FilterError):
    """A serialised state is corrupt, of another version, or inconsistent."""
