"""A hub's live streams, indexed the way the fan-out reads them.

Streams without filters that share an id form, binary mode, route schema and
route (a :class:`~streams.fanout.subscriber.GroupKey`) get one joined buffer per
batch. Filtered streams are matched record by record; those whose filters all
name a key are found by the record's key, so a record is matched only against
the streams of its key. Streams with a ``where`` filter are found by it
(:class:`~streams.fanout.wheres.WhereSet`): each distinct filter is evaluated at
most once per record, and only the streams of those that pass are matched further.
Conflated streams (route option ``conflate``) are kept apart, in
:class:`~streams.fanout.conflate.Conflation`: the fan-out offers each record to
their groups, which write them on their own schedule.
"""

from __future__ import annotations

from collections.abc import Iterator

from streams.fanout.conflate import Conflation
from streams.fanout.subscriber import GroupKey, Subscriber
from streams.fanout.wheres import WhereSet


class LiveSet:
    __slots__ = ("any_key", "by_key", "conflation", "filtered", "filtered_routes", "members", "unfiltered", "wheres")

    def __init__(self) -> None:
        self.members: dict[Subscriber, None] = {}
        self.unfiltered: dict[GroupKey, dict[Subscriber, None]] = {}
        self.filtered: dict[Subscriber, None] = {}
        self.by_key: dict[bytes, dict[Subscriber, None]] = {}
        self.any_key: dict[Subscriber, None] = {}
        # Streams with a where filter, by their filter (equal filters are one).
        self.wheres = WhereSet()
        # Live streams with filters per route, to count what filters keep from them per batch.
        self.filtered_routes: dict[str, int] = {}
        # Conflated streams, by group (never in the indexes above).
        self.conflation = Conflation()

    def __len__(self) -> int:
        return len(self.members)

    def __iter__(self) -> Iterator[Subscriber]:
        return iter(self.members)

    def __contains__(self, sub: object) -> bool:
        return sub in self.members

    def add(self, sub: Subscriber) -> None:
        self.members[sub] = None
        if sub.conflate is not None:
            self.conflation.add(sub)
            return
        if sub.filters.accepts_all:
            self.unfiltered.setdefault(sub.group, {})[sub] = None
            return
        self.filtered[sub] = None
        self.filtered_routes[sub.route] = self.filtered_routes.get(sub.route, 0) + 1
        keys = sub.filters.keys
        where = sub.filters.where
        if where is not None:
            self.wheres.add(where, sub)
        elif keys is None:
            self.any_key[sub] = None
        else:
            for key in keys:
                self.by_key.setdefault(key, {})[sub] = None

    def remove(self, sub: Subscriber) -> None:
        """Take ``sub`` out (nothing if it is not in)."""
        if self.members.pop(sub, 0) is not None:
            return
        if sub.conflate is not None:
            self.conflation.remove(sub)
            return
        if self.filtered.pop(sub, 0) is None:
            self.filtered_routes[sub.route] -= 1
            where = sub.filters.where
            if where is not None:
                self.wheres.remove(where, sub)
            elif self.any_key.pop(sub, 0) is not None:
                for key in sub.filters.keys or ():
                    subs = self.by_key.get(key)
                    if subs is not None:
                        subs.pop(sub, None)
                        if not subs:
                            del self.by_key[key]
        group = self.unfiltered.get(sub.group)
        if group is not None:
            group.pop(sub, None)
