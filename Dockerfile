# Sluice: Kafka topics as Server-Sent Events.
#   docker build -t sluice .
#   docker run -p 8000:8000 -e SECRET_KEY=... -e KAFKA_BOOTSTRAP_SERVERS=kafka:9092 \
#              -e DATABASE_URL=postgres://... -e REDIS_URL=redis://redis:6379/0 sluice
# Without KAFKA_BOOTSTRAP_SERVERS it starts the embedded development broker.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    ALLOWED_HOSTS=*

# Java 17 runs the Spark pipeline (runpipeline); the gateway itself does not need it.
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt

COPY . .
RUN useradd --create-home sluice && chown -R sluice /app
USER sluice

EXPOSE 8000
CMD ["sh", "-c", "python manage.py migrate --noinput && exec python manage.py runstreams --host 0.0.0.0 --port 8000"]
