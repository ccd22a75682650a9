"""Route path patterns (SPEC 2.1): ``{name}`` is one segment, ``*`` anything."""

from __future__ import annotations

import pytest

from streams.core.patterns import PatternError, pattern_compile


def test_literal_path() -> None:
    pattern = pattern_compile("/events")
    assert pattern.params == ()
    assert pattern.match("/events") == {}
    assert pattern.match("/events/") is None
    assert pattern.match("/event") is None
    assert pattern.match("/eventsx") is None


def test_parameter_matches_one_segment() -> None:
    pattern = pattern_compile("/events/{topic}")
    assert pattern.params == ("topic",)
    assert pattern.match("/events/scores") == {"topic": "scores"}
    assert pattern.match("/events/a.b-c_d") == {"topic": "a.b-c_d"}
    assert pattern.match("/events/") is None  # one or more characters
    assert pattern.match("/events/a/b") is None  # never a '/'
    assert pattern.match("/events") is None


def test_several_parameters() -> None:
    pattern = pattern_compile("/m/{topic}/{match}/live")
    assert pattern.params == ("topic", "match")
    assert pattern.match("/m/scores/42/live") == {"topic": "scores", "match": "42"}
    assert pattern.match("/m/scores/42/dead") is None


def test_parameter_inside_a_segment() -> None:
    pattern = pattern_compile("/t-{topic}.json")
    assert pattern.match("/t-scores.json") == {"topic": "scores"}
    assert pattern.match("/tscores.json") is None


def test_star_matches_anything_including_nothing() -> None:
    pattern = pattern_compile("/all/*")
    assert pattern.params == ()
    assert pattern.match("/all/") == {}
    assert pattern.match("/all/a") == {}
    assert pattern.match("/all/a/b/c") == {}
    assert pattern.match("/al") is None


def test_star_alone_matches_every_path() -> None:
    pattern = pattern_compile("/*")
    assert pattern.match("/") == {}
    assert pattern.match("/x/y") == {}


def test_star_and_parameter() -> None:
    pattern = pattern_compile("/{topic}/*")
    assert pattern.match("/scores/a/b") == {"topic": "scores"}


def test_regex_characters_are_literal() -> None:
    pattern = pattern_compile("/a.b/(x)+/{topic}")
    assert pattern.match("/a.b/(x)+/t") == {"topic": "t"}
    assert pattern.match("/aXb/(x)+/t") is None
    assert pattern.match("/a.b/xx/t") is None


def test_query_string_is_not_part_of_the_path() -> None:
    # The caller matches the path without its query; a '?' is just a character here.
    assert pattern_compile("/events/{topic}").match("/events/t?x=1") == {"topic": "t?x=1"}


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("events/{topic}", "must start with '/'"),
        ("", "must start with '/'"),
        ("/events/{topic}?x=1", "spaces, '?' or '#'"),
        ("/events#top", "spaces, '?' or '#'"),
        ("/my events", "spaces, '?' or '#'"),
        ("/events/{topic", "unbalanced '{'"),
        ("/events/topic}", "unbalanced '}'"),
        ("/events/{{topic}}", "unbalanced"),
        ("/events/{}", "not a valid parameter name"),
        ("/events/{1topic}", "not a valid parameter name"),
        ("/events/{to-pic}", "not a valid parameter name"),
        ("/events/{to pic}", "spaces"),
        ("/{a}/{a}", "appears twice"),
    ],
)
def test_bad_patterns(source: str, message: str) -> None:
    with pytest.raises(PatternError, match=message.replace("?", r"\?").replace("(", r"\(")):
        pattern_compile(source)
