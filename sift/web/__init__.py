"""The people's side of sift: a judging page, a live dashboard, a JSON API and metrics.

``sift web`` runs a small aiohttp app beside the workers. It reads the wire topics
itself (:mod:`sift.web.feed`) into an in-memory view (:mod:`sift.web.state`) and
publishes judgments and profile specs to Kafka; it never talks to a worker
directly, so any number of web processes can watch one service.
"""
