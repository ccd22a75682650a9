"""What ``runstreams --demo`` sets up: the demo topic and routes, a guard, an admin, live data, the pipeline."""

from __future__ import annotations

import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Any, Protocol

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command

from demo.conf import demo_settings
from demo.pipeline import DEMO_PIPELINE_ROUTE, DEMO_PIPELINE_TOPIC, DemoPipelineJob, demo_pipeline_setup
from demo.scores import DEMO_LIVE_ROUTE, DEMO_PARTITIONS, DEMO_TOPIC, DemoProducer
from guards.conf import guards_settings
from guards.issuer import DEV_GUARD, issuer_key_ensure
from guards.services import dev_guard_ensure
from streams.clusters import cluster_client, default_cluster
from streams.server.broker import topic_ensure
from streams.services import route_upsert, topic_upsert

# Said on every start: the password is shown only when the admin is created.
ADMIN_PASSWORD_HINT = "Set the demo admin's password (user 'admin') again with: python manage.py changepassword admin"


class Running(Protocol):
    def stop(self) -> None: ...


def demo_start(bootstrap: str, say: Any) -> list[Running]:
    """Migrate, create the demo's configuration and start its feeds; the parts to stop when serving ends.

    The feeds write to the default cluster (``bootstrap``, with the environment's ``KAFKA_*`` settings).
    """
    call_command("migrate", interactive=False, verbosity=0)
    client = cluster_client(default_cluster(bootstrap))
    topic_ensure(client, DEMO_TOPIC, partitions=DEMO_PARTITIONS)
    topic_upsert(name=DEMO_TOPIC, description="Demo: live football scores")
    route_upsert(
        path="/demo/scores",
        topic=DEMO_TOPIC,
        initial="snapshot",
        allow_since=True,
        description="Every match: current scores first, then live updates",
        order=10,
    )
    route_upsert(
        path=DEMO_LIVE_ROUTE,
        topic=DEMO_TOPIC,
        initial="snapshot",
        client_filter=True,
        description="Every match, current scores first; a page may narrow it with ?where= (see /viewer/scores/)",
        order=15,
    )
    route_upsert(
        path="/demo/leagues/{league}",
        topic=DEMO_TOPIC,
        allow_since=True,
        filters=[{"headers": {"league": "${params.league}"}}],
        description="One league's matches (premier or liga), live",
        order=20,
    )
    key = issuer_key_ensure(Path(guards_settings.DEV_ISSUER_KEY_FILE))
    dev_guard_ensure(key=key, challenge=10)
    route_upsert(
        path="/demo/secure/leagues/{league}",
        topic=DEMO_TOPIC,
        filters=[{"headers": {"league": "${params.league}"}}],
        guard=DEV_GUARD,
        roles=["scores:read"],
        description="One league, for holders of a scores:read token (challenged 10 s before exp)",
        order=30,
    )
    if not guards_settings.DEV_ISSUER:
        say("The development token issuer is off (SLUICE_DEV_ISSUER=1 turns it on).")
    user_model = get_user_model()
    if not user_model.objects.filter(username="admin").exists():
        password = secrets.token_urlsafe(12)
        user_model.objects.create_superuser("admin", "admin@localhost", password)
        say(f"Demo admin: user 'admin', password '{password}' (shown once)")
    say(ADMIN_PASSWORD_HINT)
    say("Live scores filtered by goals or minute, through sluice.js's where option: /viewer/scores/")
    running: list[Running] = [DemoProducer(client).start()]
    if not demo_settings.DEMO_PIPELINE:
        return running
    if shutil.which("java") is None:
        say("No java on PATH: the Spark pipeline part of the demo is left out.")
        return running
    return running + demo_pipeline_start(bootstrap, client, say)


def demo_pipeline_start(bootstrap: str, client: dict[str, str], say: Any) -> list[Running]:
    """Raw match reports -> the Spark pipeline ``demo-scores`` -> a topic with its own route."""
    # A fresh checkpoint each run: the embedded broker starts empty, old offsets would point past its end.
    checkpoint = tempfile.mkdtemp(prefix="sluice-demo-pipeline-")
    pipeline, raw = demo_pipeline_setup(client, sink_topic=DEMO_PIPELINE_TOPIC, checkpoint_location=checkpoint)
    topic_upsert(name=DEMO_PIPELINE_TOPIC, description="Demo: scores shaped by the Spark pipeline")
    route_upsert(
        path=DEMO_PIPELINE_ROUTE,
        topic=DEMO_PIPELINE_TOPIC,
        allow_since=True,
        filters=[{"headers": {"league": "${params.league}"}}],
        description="Raw match reports validated and shaped by Spark (pipeline demo-scores), one league",
        order=40,
    )
    log = Path(settings.BASE_DIR) / "var" / "demo-pipeline.log"
    job = DemoPipelineJob(pipeline.name, bootstrap, log, cleanup=checkpoint).start()
    say(
        f"Spark pipeline {pipeline.name} starting (log: {log}); "
        f"its output streams on {DEMO_PIPELINE_ROUTE} once Spark is up (about a minute)"
    )
    return [raw, job]
