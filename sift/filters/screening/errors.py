"""Errors of the review-mode (technology-assisted review) core."""

from sift.filters.errors import FilterError


class ScreeningError(FilterError, ValueError):
    """A review received a parameter, document, judgment or state it cannot use.

    The message names the parameter (or input) and the value received.
    """
