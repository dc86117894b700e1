"""The OpenAPI 3.1 description of ``/api`` (served at ``/api/openapi.json``)."""

from __future__ import annotations

from typing import Any

from sift import __version__
from sift.topics.records import BAG_RULES, MAX_BAGS, MAX_UPDATE, MEASURES, MODELS


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_ERR = {"$ref": "#/components/responses/Error"}
_UNAUTH = {"$ref": "#/components/responses/Unauthorized"}
_NUM = {"type": ["number", "null"]}
_INT = {"type": ["integer", "null"]}


def openapi() -> dict[str, Any]:
    """The OpenAPI document (a fresh dict)."""
    profile_param = {"name": "profile", "in": "path", "required": True,
                     "schema": {"type": "string"}, "description": "Profile name."}
    schemas: dict[str, Any] = {
        "Error": {"type": "object", "required": ["error"],
                  "properties": {"error": {"type": "string"},
                                 "relevant": {"type": "boolean",
                                              "description": "On a 409 for a document "
                                              "already judged: the verdict that counts."}}},
        "JudgmentIn": {
            "type": "object", "required": ["doc_id", "profile", "relevant"],
            "properties": {"doc_id": {"type": "string"}, "profile": {"type": "string"},
                           "relevant": {"type": "boolean"},
                           "judge": {"type": "string", "description": "Who judged (default "
                                     "`web`)."},
                           "id": {"type": "string", "description": "Idempotency key (default: "
                                  "a new one)."},
                           "profile_epoch": {"type": "string", "description": "The life "
                                             "of the profile the judgment is meant for (a "
                                             "decision's `profile_epoch`; default: that of "
                                             "the decision that delivered the document, "
                                             "while it is queued or remembered). A "
                                             "worker refuses the judgment (dead letter "
                                             "`stale_profile`) once the profile was deleted "
                                             "and created again, or reset."},
                           "correct": {"type": "boolean", "description": "Give a judged "
                                       "document of a standing profile the other label: the "
                                       "worker corrects the earlier judgment (default false: "
                                       "409 for a judged document)."}}},
        "Judgment": {
            "type": "object", "required": ["doc_id", "profile", "relevant"],
            "properties": {"id": {"type": "string"}, "doc_id": {"type": "string"},
                           "profile": {"type": "string"}, "relevant": {"type": "boolean"},
                           "judge": {"type": "string"}, "ts": {"type": "number"},
                           "text": {"type": "string"}, "profile_epoch": {"type": "string"}}},
        "ProfileSpec": {
            "type": "object", "required": ["profile"],
            "properties": {"profile": {"type": "string"}, "query": {"type": "string"},
                           "model": {"type": "string", "enum": list(MODELS)},
                           "params": {"type": "object"},
                           "measure": {"anyOf": [
                               {"type": "string", "enum": list(MEASURES)},
                               {"type": "string", "pattern": "^utility:[^:]+:[^:]+$",
                                "description": "a linear utility: finite credits of a "
                                "relevant and of a non-relevant delivery"}]},
                           "update": {"oneOf": [{"type": "string", "enum": ["every", "never"]},
                                                {"type": "integer", "minimum": 1,
                                                 "maximum": MAX_UPDATE}]},
                           "positives": {"type": "array", "items": {"type": "string"},
                                         "description": "document ids (training corpus or "
                                         "recently seen) or texts (whitespace inside); the "
                                         "worker dead-letters any other entry as "
                                         "unknown_positive"},
                           "bags": {"type": "integer", "minimum": 1, "maximum": MAX_BAGS,
                                    "description": "members from consecutive pseudolabel "
                                    "seeds deciding together (1: one profile); a profile "
                                    "whose state the changelog cannot hold is dead-lettered "
                                    "as state_too_large"},
                           "bag_rule": {"type": "string", "enum": list(BAG_RULES)},
                           "reset": {"type": "boolean", "description": "a spec for a profile "
                                     "that exists replaces it, and the new profile learns the "
                                     "judgments the old one held again; true: start without "
                                     "them"},
                           "delete": {"type": "boolean", "description": "true, on the "
                                      "profiles topic: delete the profile (the other fields "
                                      "are ignored); POST /api/profiles refuses it (400): "
                                      "use DELETE /api/profiles/{profile}"}}},
        "Profile": {
            "type": "object", "required": ["profile", "delivered", "judged", "pending"],
            "properties": {"profile": {"type": "string"}, "model": {"type": ["string", "null"]},
                           "bags": {"type": "integer", "description": "members of a bagged "
                                    "profile (1: not bagged); its score and threshold are "
                                    "the rule's over its members' margins"},
                           "measure": {"type": ["string", "null"]},
                           "update": {"type": ["string", "null"]},
                           "query": {"type": ["string", "null"]},
                           "delivered": {"type": "integer"}, "judged": {"type": "integer"},
                           "relevant": {"type": "integer"}, "judgments": {"type": "integer"},
                           "precision": _NUM, "pending": {"type": "integer"},
                           "threshold": _NUM, "model_version": _INT,
                           "learned_judgments": _INT, "waiting_judgments": _INT,
                           "last_update": _NUM,
                           "profile_epoch": {"type": ["string", "null"], "description":
                                             "The id of the profile's life: kept by a "
                                             "replacement, new when it is deleted and "
                                             "created again or reset."}}},
        "PendingItem": {
            "type": "object",
            "description": "A document awaiting judgment: a profile's delivery (score, "
                           "threshold, model_version) or a review's request (review: true, "
                           "batch, rank).",
            "required": ["doc_id", "profile", "title", "snippet"],
            "properties": {"doc_id": {"type": "string"}, "profile": {"type": "string"},
                           "title": {"type": "string"}, "snippet": {"type": "string"},
                           "score": {"type": "number"}, "threshold": {"type": "number"},
                           "model_version": {"type": "integer"}, "ts": {"type": "number"},
                           "profile_epoch": {"type": "string", "description": "The life of "
                                             "the profile that delivered it."},
                           "review": {"type": "boolean"}, "batch": {"type": "integer"},
                           "rank": {"type": "integer"}}},
        "Review": {
            "type": "object", "required": ["review", "stop"],
            "properties": {"review": {"type": "string"}, "screened": _NUM, "found": _NUM,
                           "r_hat": _NUM, "recall": _NUM, "target_recall": _NUM,
                           "stop": {"type": "boolean"}, "ts": {"type": "number"},
                           "pending": {"type": "integer",
                                       "description": "Requests awaiting judgment."},
                           "query": {"type": "string",
                                     "description": "The review's topic text, once its "
                                                    "spec was read."}}},
        "Stats": {
            "type": "object", "required": ["ts", "rates", "totals", "profiles", "reviews"],
            "properties": {
                "ts": {"type": "number"}, "uptime": {"type": "number"},
                "rates": {"type": "object", "description": "Events per second over the last "
                          "10 s: documents, decisions, judgments, dead_letters.",
                          "additionalProperties": {"type": "number"}},
                "totals": {"type": "object", "additionalProperties": {"type": "integer"}},
                "dead_letters_by_reason": {"type": "object",
                                           "additionalProperties": {"type": "integer"}},
                "lag": {"type": "object", "description": "Consumer lag of the workers' group "
                        "per topic.", "additionalProperties": {"type": "integer"}},
                "lag_total": _INT, "lag_ts": _NUM,
                "lag_error": {"type": ["string", "null"],
                              "description": "Why the last lag reading failed (the lag is "
                                             "then unknown: empty, lag_total null)."},
                "caught_up": {"type": "boolean",
                              "description": "Whether sift web has read what the topics "
                                             "held when it started; until then a name not "
                                             "seen is answered 503, not 404."},
                "behind": {"type": ["integer", "null"],
                           "description": "Messages still to read before caught_up (null "
                                          "once caught up, or before it is known)."},
                "profiles": {"type": "array", "items": _ref("Profile")},
                "reviews": {"type": "array", "items": _ref("Review")},
                "skipped": {"type": "object", "additionalProperties": {"type": "integer"}},
                "corrections": {"type": "integer",
                                "description": "Judgments read that gave a judged document "
                                               "the other label (the counts follow them)."}}},
    }
    accepted_judgment = _json({"type": "object", "required": ["judgment"],
                               "properties": {"judgment": _ref("Judgment")}},
                              "Published to the judgments topic.")
    paths: dict[str, Any] = {
        "/api/profiles": {
            "get": {"operationId": "listProfiles", "summary": "Profiles and their stats.",
                    "responses": {"200": _json({"type": "object", "required": ["profiles"],
                                                "properties": {"profiles": {
                                                    "type": "array",
                                                    "items": _ref("Profile")}}},
                                               "The profiles.")}},
            "post": {"operationId": "putProfile", "summary": "Create or replace a profile "
                     "(publishes the spec to the profiles topic).",
                     "security": [{"bearer": []}],
                     "requestBody": {"required": True, "content": {
                         "application/json": {"schema": _ref("ProfileSpec")}}},
                     "responses": {"202": _json({"type": "object", "required": ["spec"],
                                                 "properties": {"spec": _ref("ProfileSpec")}},
                                                "Published."),
                                   "400": _ERR, "401": _UNAUTH, "413": _ERR, "503": _ERR}},
        },
        "/api/profiles/{profile}": {
            "parameters": [profile_param],
            "get": {"operationId": "getProfile", "summary": "One profile's stats.",
                    "responses": {"200": _json(_ref("Profile"), "The profile."),
                                  "404": _ERR, "503": _ERR}},
            "delete": {"operationId": "deleteProfile", "summary": "Delete a profile "
                       "(publishes a deletion spec).", "security": [{"bearer": []}],
                       "responses": {"202": _json({"type": "object"}, "Published."),
                                     "401": _UNAUTH, "404": _ERR, "503": _ERR}},
        },
        "/api/pending": {
            "get": {"operationId": "listPending",
                    "summary": "Delivered documents awaiting judgment, oldest first.",
                    "parameters": [
                        {"name": "profile", "in": "query", "required": True,
                         "schema": {"type": "string"}},
                        {"name": "limit", "in": "query", "required": False,
                         "schema": {"type": "integer", "minimum": 1, "maximum": 1000,
                                    "default": 50}}],
                    "responses": {"200": _json({"type": "object", "required": ["items"],
                                                "properties": {"profile": {"type": "string"},
                                                               "items": {"type": "array",
                                                                         "items": _ref(
                                                                             "PendingItem")}}},
                                               "The queue."),
                                  "400": _ERR, "404": _ERR, "503": _ERR}},
        },
        "/api/judgments": {
            "post": {"operationId": "postJudgment",
                     "summary": "Judge a delivered document (publishes to the judgments "
                                "topic, keyed by profile).",
                     "security": [{"bearer": []}],
                     "requestBody": {"required": True, "content": {
                         "application/json": {"schema": _ref("JudgmentIn")}}},
                     "responses": {"202": accepted_judgment, "400": _ERR, "401": _UNAUTH,
                                   "404": _ERR, "409": _ERR, "413": _ERR, "503": _ERR}},
        },
        "/api/stats": {
            "get": {"operationId": "getStats", "summary": "Everything the dashboard shows.",
                    "responses": {"200": _json(_ref("Stats"), "The stats.")}},
        },
        "/api/events": {
            "get": {"operationId": "streamStats",
                    "summary": "Server-sent events: a `stats` event (a Stats object) every "
                               "second.",
                    "responses": {"200": {"description": "An event stream.",
                                          "content": {"text/event-stream": {
                                              "schema": {"type": "string"}}}}}},
        },
        "/api/openapi.json": {
            "get": {"operationId": "getOpenAPI", "summary": "This document.",
                    "responses": {"200": _json({"type": "object"}, "OpenAPI 3.1.")}},
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "sift web API", "version": __version__,
                 "description": "Judging, profiles and live stats of a sift streaming "
                                "service. Writes need the API token (`SIFT_API_TOKEN`) as "
                                "`Authorization: Bearer <token>`; a missing or wrong token "
                                "gets 401 and changes nothing. Prometheus metrics are at "
                                "`/metrics` (text format, not part of this API)."},
        "servers": [{"url": "/"}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "responses": {
                "Error": _json(_ref("Error"), "The request cannot be served (one-line "
                               "`error`)."),
                "Unauthorized": _json(_ref("Error"), "Missing or wrong API token; nothing "
                                      "changed."),
            },
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                           "description": "SIFT_API_TOKEN"}},
        },
    }
