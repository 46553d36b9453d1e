# The app in one image: `bot serve` (receiver, with or without a worker pool) or `bot worker`.
# Agents' commands run in bubblewrap, which needs user namespaces inside the container: see
# "Operating it" in the README (compose.yaml sets what it needs).
FROM python:3.11-slim

RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends git bubblewrap \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --create-home --uid 10001 bot
WORKDIR /app
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY policies ./policies
RUN pip install --no-cache-dir . && mkdir -p /data && chown bot:bot /data

USER bot
ENV BOT_DATA_DIR=/data BOT_HOST=0.0.0.0 BOT_PORT=8000
VOLUME /data
EXPOSE 8000
CMD ["bot", "serve"]
