"""The configuration's revision: one row whose token the database changes on every configuration write.

A worker keeps its route table while the token it was built at is still the one stored, so
renewing the table once a cache time costs one small query instead of a rebuild. The token is
written by triggers on the tables the route table and the topic settings are built from, in the
transaction of the write, whatever made it: a model's ``save()``, ``QuerySet.update()`` and bulk
writes (no signals), raw SQL, another process. A random token rather than a counter: a rolled back
or restored database never brings back a value a worker has already seen with other rows.

:func:`revision_triggers_install` sets the triggers up after every ``migrate`` (and ``flush``): a
migration that rebuilds one of the tables (SQLite does, to alter a column) drops its triggers. Where
there is no row (a database migrated by other means, or another backend), no token is known and
every renewal rebuilds.
"""

from __future__ import annotations

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper

# The tables whose rows the route table and the topic settings are built from.
CONFIGURATION_TABLES = (
    "streams_route",
    "streams_routefilter",
    "streams_schema",
    "streams_topic",
    "streams_cluster",
    "guards_guard",
)
REVISION_TABLE = "streams_configrevision"

_SQLITE_TOKEN_WRITE = (
    f"INSERT INTO {REVISION_TABLE} (id, token) VALUES (1, lower(hex(randomblob(16)))) "
    "ON CONFLICT (id) DO UPDATE SET token = excluded.token"
)
_POSTGRESQL_TOKEN_WRITE = (
    f"INSERT INTO {REVISION_TABLE} (id, token) VALUES (1, gen_random_uuid()::text) "
    "ON CONFLICT (id) DO UPDATE SET token = excluded.token"
)
# Before the statement, once per statement: every transaction that writes the configuration takes
# the revision row's lock before any configuration row's, so two of them wait for each other in one
# order and never deadlock over it.
_POSTGRESQL_FUNCTION = f"""
CREATE OR REPLACE FUNCTION sluice_config_revise() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    {_POSTGRESQL_TOKEN_WRITE};
    RETURN NULL;
END
$$
"""


class ConfigRevision(models.Model):
    """The configuration's revision token (one row, id 1), written by database triggers only."""

    ROW = 1

    id = models.SmallIntegerField(primary_key=True)
    token = models.CharField(max_length=36)

    def __str__(self) -> str:
        return self.token


def revision_triggers_install(connection: BaseDatabaseWrapper) -> bool:
    """Create the triggers that are missing and write a new token; False on a backend without triggers here."""
    present = set(connection.introspection.table_names())
    if REVISION_TABLE not in present:
        return False
    tables = [table for table in CONFIGURATION_TABLES if table in present]
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            for table in tables:
                for event in ("INSERT", "UPDATE", "DELETE"):
                    cursor.execute(
                        f"CREATE TRIGGER IF NOT EXISTS sluice_revise_{table}_{event.lower()} "
                        f"AFTER {event} ON {table} BEGIN {_SQLITE_TOKEN_WRITE}; END"
                    )
            cursor.execute(_SQLITE_TOKEN_WRITE)
            return True
        if connection.vendor == "postgresql":
            cursor.execute(_POSTGRESQL_FUNCTION)
            for table in tables:
                cursor.execute(
                    f"CREATE OR REPLACE TRIGGER sluice_revise BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE "
                    f"ON {table} FOR EACH STATEMENT EXECUTE FUNCTION sluice_config_revise()"
                )
            cursor.execute(_POSTGRESQL_TOKEN_WRITE)
            return True
    return False
