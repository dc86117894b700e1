# The sift worker. Build and run with the broker: docker-compose up --build
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY . /app
RUN pip install . \
 && useradd --create-home --uid 10001 sift \
 && mkdir -p /app/.cache/sift-worker \
 && chown -R sift /app/.cache

USER sift
# the package is installed, not run from the checkout: name the bundled training corpus
# (IDF, pseudolabels, positives by id), which default_corpus() finds only in a checkout
ENV SIFT_BROKER=kafka://kafka:9092 \
    SIFT_IDF_CORPUS=/app/data/reuters21578/train.jsonl.gz \
    SIFT_WEB_HOST=0.0.0.0 \
    SIFT_DATA_DIR=/app/.cache/sift-worker
EXPOSE 6066
CMD ["sift", "worker"]
