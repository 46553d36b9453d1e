# The app in one image: `bot serve` (receivers, with or without a worker pool) or `bot worker`.
# Agents' commands run in bubblewrap, which needs user namespaces inside the container: see
# "Run it with Docker Compose" in the README (compose.yaml sets what it needs).
FROM python:3.11-slim

RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends git bubblewrap \
    && rm -rf /var/lib/apt/lists/*

# uid and gid 10001: the App's key must be readable by this group (README, step 3).
RUN groupadd --gid 10001 bot && useradd --create-home --uid 10001 --gid 10001 bot
WORKDIR /app
# The dependencies, with the postgres extra (compose runs on Postgres), exactly as
# requirements.lock pins them, each file checked against its hash (`bash scripts/lock` writes
# it; CI checks it is current), then the app alone on top.
COPY requirements.lock ./
RUN pip install --no-cache-dir --require-hashes -r requirements.lock
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY policies ./policies
RUN pip install --no-cache-dir --no-deps . && mkdir -p /data && chown bot:bot /data

USER bot
ENV BOT_DATA_DIR=/data BOT_HOST=0.0.0.0 BOT_PORT=8000
VOLUME /data
EXPOSE 8000
# The process answers on BOT_PORT (a `bot worker` with BOT_WORKER_PORT at the same port
# passes it too); python rather than curl, which the slim image lacks.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('BOT_PORT', '8000'), timeout=4)"]
CMD ["bot", "serve"]
