"""Live demo data: football scores, keyed by match, with a league header.

Goals and minutes are published as JSON (``goals`` is the two sides' sum, so a
``where`` filter can ask for "at least N goals": the language has no arithmetic);
when a match ends its key gets a tombstone (a ``delete`` event in the browser)
and a new match takes its place.
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import Producer

DEMO_TOPIC = "demo.scores"
DEMO_PARTITIONS = 3
# The demo route pages may narrow with ?where= (client_filter), and the page that does.
DEMO_LIVE_ROUTE = "/demo/live"

_TEAMS = {
    "premier": ["Arsenal", "Chelsea", "Liverpool", "Everton", "Fulham", "Brentford", "Spurs", "Wolves"],
    "liga": ["Betis", "Girona", "Osasuna", "Sevilla", "Valencia", "Villarreal", "Getafe", "Alaves"],
}


@dataclass
class _Match:
    key: str
    league: str
    home: str
    away: str
    minute: int = 0
    score: list[int] = field(default_factory=lambda: [0, 0])


class DemoProducer:
    """A background thread that publishes a few score updates per second."""

    def __init__(self, client: dict[str, str], interval: float = 0.4, seed: int | None = None) -> None:
        """``client``: the cluster's librdkafka settings (bootstrap servers, TLS, SASL)."""
        self._producer = Producer({**client, "linger.ms": 5, "log_level": 0})
        self._interval = interval
        self._random = random.Random(seed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sluice-demo-producer", daemon=True)
        self._serial = 0
        self._matches = [self._new_match(f"match-{i}", league) for i, league in enumerate(["premier", "liga"] * 3)]

    def _new_match(self, key: str, league: str) -> _Match:
        home, away = self._random.sample(_TEAMS[league], 2)
        return _Match(key=key, league=league, home=home, away=away)

    def start(self) -> DemoProducer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._producer.flush(5)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.step()
            self._producer.poll(0)

    def step(self) -> None:
        index = self._random.randrange(len(self._matches))
        match = self._matches[index]
        headers: list[tuple[str, str | bytes | None]] = [("league", match.league.encode())]
        match.minute += self._random.randint(1, 6)
        if match.minute >= 90:
            self._producer.produce(DEMO_TOPIC, key=match.key.encode(), value=None, headers=headers)
            self._serial += 1
            self._matches[index] = self._new_match(f"match-{len(self._matches) + self._serial}", match.league)
            return
        if self._random.random() < 0.3:
            match.score[self._random.randrange(2)] += 1
        value = {
            "match": match.key,
            "league": match.league,
            "home": match.home,
            "away": match.away,
            "score": match.score,
            "goals": sum(match.score),
            "minute": match.minute,
            "ts": int(time.time() * 1000),
        }
        self._producer.produce(DEMO_TOPIC, key=match.key.encode(), value=json.dumps(value).encode(), headers=headers)
