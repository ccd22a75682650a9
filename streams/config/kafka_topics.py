"""The configured topics in Kafka, for the configuration commands: create the missing ones, show each one's state."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from streams.models import Topic
from streams.topics import MISSING, TopicCreateError, topic_create, topic_rows_state


@dataclass
class TopicsCreated:
    """What ``applyconfig --create-topics`` did in Kafka: a line per topic, and the ones Kafka refused."""

    lines: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def config_topics_create(names: Iterable[str], *, check: bool = False) -> TopicsCreated:
    """Create each of the configured topics ``names`` in its cluster; with ``check``, say which would be."""
    done = TopicsCreated()
    topics = list(Topic.objects.filter(name__in=set(names)).select_related("cluster").order_by("name"))
    if check:
        states = topic_rows_state(topics)
        for topic in topics:
            state = states[topic.name]
            verb = "would create" if state.state == MISSING else "would leave"
            done.lines.append(f"{verb} topic {topic.name} in Kafka ({state.summary})")
        return done
    for topic in topics:
        try:
            done.lines.append(topic_create(topic).message)
        except TopicCreateError as exc:
            done.failures.append(str(exc))
    return done


def config_topics_state() -> str:
    """Each configured topic's state in its Kafka cluster, as YAML comments (a file applied back ignores them)."""
    topics = list(Topic.objects.select_related("cluster").order_by("name"))
    if not topics:
        return ""
    states = topic_rows_state(topics)
    lines = ["# In Kafka (read now; not configuration):"]
    lines += [f"#   {topic.name}: {states[topic.name].summary}" for topic in topics]
    return "\n".join(lines) + "\n"
