# Sluice: Kafka topics as Server-Sent Events. Two images from this file (docs/operations.md, "Installing"):
#   docker build --target gateway -t sluice-gateway .    # runstreams: streams, admin, REST API; no Java, no Spark
#   docker build --target pipeline -t sluice-pipeline .  # the gateway plus Java 17 and PySpark, for runpipeline
#   docker run -p 8000:8000 -e SECRET_KEY=... -e ALLOWED_HOSTS=sluice.example.com \
#              -e KAFKA_BOOTSTRAP_SERVERS=kafka:9092 -e DATABASE_URL=postgres://... \
#              -e REDIS_URL=redis://redis:6379/0 sluice-gateway
# ALLOWED_HOSTS must name the host clients reach Sluice by (the image sets none: unset, only
# localhost is served). Without KAFKA_BOOTSTRAP_SERVERS it starts the embedded development broker.
# The command serves; it does not migrate (every replica would): migrate once per release, before
# the new replicas start, with the same image and environment:
#   docker run --rm -e SECRET_KEY=... -e DATABASE_URL=postgres://... sluice-gateway python manage.py migrate --noinput
# deploy/compose.yaml (the `migrate` service) and deploy/kubernetes/migrate-job.yaml do it that way.

# Bookworm: the Debian release that has openjdk-17 (the pipeline stage's Java).
FROM python:3.11-slim-bookworm AS base

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The app's directory is the user's: migrate's SQLite file and var/ (the development issuer's key) go there.
# UID 1000: deploy/kubernetes runs the pods as that user (runAsNonRoot needs a number).
RUN useradd --create-home --uid 1000 sluice && install -d -o sluice /app
WORKDIR /app
COPY requirements-gateway.txt .
RUN pip install --no-cache-dir -r requirements-gateway.txt


# Java 17 runs the Spark pipeline (runpipeline); the gateway does not need it.
FROM base AS pipeline

RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/*
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
# Where deploy/ mounts the pipelines' checkpoints: a volume mounted here keeps the user's ownership.
RUN install -d -o sluice /var/lib/sluice/checkpoints

COPY --chown=sluice . .
USER sluice
EXPOSE 8000
CMD ["python", "manage.py", "runstreams", "--host", "0.0.0.0", "--port", "8000"]


# The default target (last): what serves streams.
FROM base AS gateway

COPY --chown=sluice . .
USER sluice
EXPOSE 8000
CMD ["python", "manage.py", "runstreams", "--host", "0.0.0.0", "--port", "8000"]
