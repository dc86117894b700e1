"""A worker for agent tests with no broker: Faust's test wrappers drive its agents, every
topic's ``send`` is a mock and no table writes a changelog."""

from __future__ import annotations

from typing import Any
from unittest.mock import AsyncMock, Mock

from sift.agents.app import create_app
from sift.agents.service import TrainingSet, default_corpus
from sift.filters.vectorize import Vectorizer
from sift.settings import Settings
from sift.topics.codecs import read_jsonl
from sift.topics.records import Document

TRAIN = ["wheat exports rose", "wheat crop", "crude oil prices", "oil output", "gold mine"]


def training_set() -> TrainingSet:
    """The training set of :data:`TRAIN` (ids ``t0``, ``t1``, ...)."""
    vec = Vectorizer(n_features=2**12).fit(TRAIN)
    return TrainingSet(vec, vec.transform(TRAIN), {f"t{i}": i for i in range(len(TRAIN))})


def reuters_training(n: int = 600) -> TrainingSet:
    """A training set of the first ``n`` Reuters training documents (records of a
    realistic size, ~100 KB a profile), IDF from them; ids the documents'."""
    docs = list(read_jsonl(default_corpus(), Document.from_obj))[:n]
    vec = Vectorizer().fit(d.text for d in docs)
    return TrainingSet(vec, vec.transform([d.text for d in docs]),
                       {d.id: i for i, d in enumerate(docs)})


def reuters_stream(start: int, stop: int) -> list[dict[str, str]]:
    """Reuters training documents ``start:stop`` (past :func:`reuters_training`'s) as
    ``{"id", "text"}`` documents to stream."""
    docs = list(read_jsonl(default_corpus(), Document.from_obj))[start:stop]
    return [{"id": d.id, "text": d.text} for d in docs]


def offline_worker(data_dir: str, partitions: int = 2, **settings_given: Any) -> Any:
    """The worker ``create_app`` makes, trained on :data:`TRAIN`, offline (see the module);
    ``settings_given``: more of its :class:`Settings`."""
    training = training_set()
    settings = Settings(broker="kafka://127.0.0.1:1", app_id="sift-test", partitions=partitions,
                        data_dir=data_dir, batch_timeout=0.01, **settings_given)
    w = create_app(settings, training=training)
    w.app.finalize()
    w.app.conf.store = "memory://"
    w.app.flow_control.resume()
    for t in [*w.topics.values(), *w.reviews.topics.values()]:
        t.send = AsyncMock()  # type: ignore[method-assign]
    for table in w.app.tables.values():
        table.send_changelog = Mock()  # the changelog producer needs a broker
    return w


def agent(worker: Any, name: str) -> Any:
    """The worker's agent whose name ends with ``name``."""
    return next(a for a in worker.app.agents.values() if a.name.endswith(name))
