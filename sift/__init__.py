"""sift: a streaming adaptive document filter."""

__version__ = "0.1.0"
