"""The where language: parsing with positions, placeholders filled as values, evaluation over records."""

from __future__ import annotations

import json
import re

import pytest

from streams.core.filters import FilterSet, MessageFilter
from streams.core.records import Record
from streams.core.templating import ExpansionContext, TemplateError
from streams.core.where import (
    CLIENT_MAX_DEPTH,
    CLIENT_MAX_LENGTH,
    WhereError,
    client_where_parse,
    where_compile,
    where_resolve,
    where_template,
)
from streams.core.where.parser import where_parse


def record(value: object, key: bytes | None = b"m1", headers: list[tuple[str, bytes | None]] | None = None) -> Record:
    raw = value if isinstance(value, bytes) or value is None else json.dumps(value).encode()
    return Record(0, 7, 1_700_000_000_000, key, raw, headers)


def holds(expression: str, rec: Record, **context: object) -> bool:
    where = where_resolve(where_template(expression), ExpansionContext(**context) if context else NO_CONTEXT, None)
    assert where is not None
    return where.admits(rec)


NO_CONTEXT = ExpansionContext({})
MATCH = {"league": "EU", "score": {"home": 4, "away": 1}, "minute": 67, "live": True, "tags": ["cup", "final"]}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("value.score.home > 3", True),
        ("value.score.home > 4", False),
        ("value.score.home >= 4 and value.minute < 90", True),
        ("value.score.away == 2 or value.league == 'EU'", True),
        ("value.score.away == 2 || value.league != 'EU'", False),
        ("not value.live", False),
        ("!(value.minute <= 45) && value.live", True),
        ("value.live", True),
        ("value.league in ['EU', 'US']", True),
        ("value.minute in [1, 2, 67.0]", True),
        ("value.league not in ['EU']", False),
        ("'cup' in value.tags", True),
        ("'league' in value.tags", False),
        ("exists(value.score.home)", True),
        ("exists(value.nothing)", False),
        ("startswith(value.league, 'E')", True),
        ("startswith(key, 'x')", False),
        ("value['score'].home == 4", True),
        ("value.tags[1] == 'final'", True),
        ("value.tags[5] == 'final'", False),
        ("key == 'm1'", True),
        ("headers.region == 'eu-west'", True),
        ("headers['region'] == 'us'", False),
        ("timestamp > 1600000000000", True),
        ("3 < value.score.home", True),
        # A field that is missing, or of another kind, makes every comparison false, != included.
        ("value.nothing != 1", False),
        ("not (value.nothing == 1)", True),
        ("value.league > 3", False),
        ("value.minute == '67'", False),
        ("value.live == true and value.live != false", True),
        ("value.score.home > value.score.away", True),
        ("value.score.home == value.league", False),
    ],
)
def test_expressions_over_a_record(expression: str, expected: bool) -> None:
    rec = record(MATCH, headers=[("region", b"eu-west")])
    assert holds(expression, rec) is expected


def test_a_plain_text_value_is_a_string_and_a_tombstone_has_no_value() -> None:
    assert holds("value == 'hello'", record(b"hello"))
    assert not holds("exists(value)", record(None))
    assert holds("key == 'm1'", record(None))


@pytest.mark.parametrize(
    ("expression", "position", "message"),
    [
        ("value.x ==", 11, "expected a field, a number"),
        ('value.x == "abc', 12, "unterminated string"),
        ("league > 1", 1, "expected value, key, headers or timestamp"),
        ("(value.a > 1", 13, "expected ')'"),
        ("value.a > 1 2", 13, "expected 'and', 'or' or the end"),
        ("headers == 'x'", 9, "header name"),
        ("key.x == 1", 4, "key has no fields"),
        ("value.a == ${secret}", 12, "is not one of"),
        ("value.a in [1, 2", 17, "expected ']'"),
        ("value.a == 1 @ 2", 14, "unexpected '@'"),
        ('value.a == "\\q"', 13, "unknown escape"),
    ],
)
def test_errors_name_the_position(expression: str, position: int, message: str) -> None:
    with pytest.raises(WhereError, match=re.escape(message)) as caught:
        where_template(expression)
    assert caught.value.position == position
    assert f"(at position {position})" in str(caught.value)


def test_an_empty_expression_is_an_error_without_a_position() -> None:
    with pytest.raises(WhereError, match="empty") as caught:
        where_template("  ")
    assert caught.value.position == 0


def test_placeholders_are_filled_as_values_never_as_text() -> None:
    template = where_template('value.league == "${params.league}" and value.score.home > ${query.min}')
    assert template.params == {"league"}
    assert template.queries == {"min"}
    assert template.params_only
    rec = record(MATCH)
    assert holds(template.source, rec, params={"league": "EU"}, query={"min": "3"})
    assert not holds(template.source, rec, params={"league": "EU"}, query={"min": "4"})
    # A value that looks like more expression is still one string.
    assert not holds(template.source, rec, params={"league": '" or true or "'}, query={"min": "0"})
    # A bare placeholder compares as a number with a number, as text with text.
    assert holds("value.league == ${query.l}", rec, params={}, query={"l": "EU"})
    assert not holds("value.minute == ${query.m}", rec, params={}, query={"m": "sixty"})


def test_claims_and_identity_come_from_the_token() -> None:
    template = where_template("value.tenant == ${claims.tenant} and value.owner == ${identity}")
    assert not template.params_only
    rec = record({"tenant": "acme", "owner": "u1"})
    assert holds(template.source, rec, params={}, identity="u1", attributes={"tenant": "acme"})
    assert not holds(template.source, rec, params={}, identity="u1", attributes={"tenant": "other"})
    with pytest.raises(TemplateError, match=r"claims\.tenant"):
        template.fill(ExpansionContext({}, identity="u1"))


def test_the_same_filled_in_expression_is_one_filter() -> None:
    template = where_template("value.team == ${params.team}")
    first = where_resolve(template, ExpansionContext({"team": "a"}), None)
    again = where_resolve(where_template("value.team   ==   ${params.team}"), ExpansionContext({"team": "a"}), None)
    other = where_resolve(template, ExpansionContext({"team": "b"}), None)
    assert first == again
    assert hash(first) == hash(again)
    assert first != other
    assert where_compile(where_parse("value.a == 1")) is where_compile(where_parse("value.a == 1"))


def test_a_client_filter_is_anded_and_can_only_narrow() -> None:
    route = where_template("value.tenant == ${claims.tenant}")
    context = ExpansionContext({}, identity="u", attributes={"tenant": "acme"})
    widen = where_resolve(route, context, client_where_parse("value.tenant == 'other' or true"))
    assert widen is not None
    assert not widen.admits(record({"tenant": "other"}))
    assert widen.admits(record({"tenant": "acme"}))
    narrow = where_resolve(route, context, client_where_parse("value.goals > 2"))
    assert narrow is not None
    assert narrow.admits(record({"tenant": "acme", "goals": 3}))
    assert not narrow.admits(record({"tenant": "acme", "goals": 1}))


def test_client_filters_are_limited() -> None:
    with pytest.raises(WhereError, match="placeholders") as caught:
        client_where_parse("value.tenant == ${claims.tenant}")
    assert caught.value.position == 17
    with pytest.raises(WhereError, match="longer than"):
        client_where_parse("value.a == 1 or " * 40 + "true")
    assert len("value.a == 1 or " * 40) > CLIENT_MAX_LENGTH
    with pytest.raises(WhereError, match=f"nested deeper than {CLIENT_MAX_DEPTH}"):
        client_where_parse("(" * 8 + "value.a" + ")" * 8)
    with pytest.raises(WhereError, match="nested deeper than 32"):
        where_template("not " * 40 + "value.a")


def test_a_filter_set_with_where_is_not_accepting_all_and_checks_both_parts() -> None:
    where = where_resolve(where_template("value.goals > 2"), NO_CONTEXT, None)
    filters = FilterSet((MessageFilter(key=b"m1"),), where)
    assert not filters.accepts_all
    assert filters.keys == {b"m1"}
    assert filters.admits(record({"goals": 3}))
    assert not filters.admits(record({"goals": 3}, key=b"m2"))
    assert not filters.admits(record({"goals": 1}))
    assert FilterSet((), where).matches(b"any", None)  # the where part is asked apart
