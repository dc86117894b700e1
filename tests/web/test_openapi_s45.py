"""The served OpenAPI document says what the API does with a profile spec (a documentation
audit, forty-fifth session): a client validating against it accepted a POST the API
refuses, and refused specs the API accepts."""

from __future__ import annotations

import re

import pytest

from sift.topics.errors import RecordError
from sift.topics.records import MAX_UPDATE, ProfileSpec
from sift.web.openapi import openapi

SPEC = openapi()["components"]["schemas"]["ProfileSpec"]["properties"]


@pytest.mark.parametrize("measure", ["utility:2:-1", "utility:1.5:-0.5", "t11su"])
def test_every_measure_the_decoder_takes_fits_the_schema(measure: str) -> None:
    assert ProfileSpec.from_obj({"profile": "p", "query": "q", "measure": measure})
    options = SPEC["measure"]["anyOf"]
    assert any(measure in o.get("enum", []) or re.fullmatch(o.get("pattern", "$^"), measure)
               for o in options)


def test_the_schema_bounds_update_as_the_decoder_does() -> None:
    bounded = [o for o in SPEC["update"]["oneOf"] if o.get("type") == "integer"]
    assert bounded and bounded[0]["maximum"] == MAX_UPDATE
    ProfileSpec.from_obj({"profile": "p", "query": "q", "update": MAX_UPDATE})
    with pytest.raises(RecordError, match="'update' must be"):
        ProfileSpec.from_obj({"profile": "p", "query": "q", "update": MAX_UPDATE + 1})


def test_the_schema_says_post_refuses_delete() -> None:
    assert "DELETE /api/profiles/{profile}" in SPEC["delete"]["description"]
