"""``sift demo``'s arguments, refused before any broker starts."""

from __future__ import annotations

import pytest

from sift.cli import main


@pytest.mark.parametrize("limit", ["0", "-5"])
def test_a_limit_below_one_is_refused(limit: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``--limit -5`` streamed all but the last five documents (a slice), ``--limit 0``
    ran a demo of nothing and printed NaN measures."""
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--limit", limit])
    assert exc.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"must be a positive integer, got {limit}" in err
