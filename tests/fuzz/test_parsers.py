"""The pure parsers under arbitrary input: they answer or raise their own typed error, nothing else."""

from __future__ import annotations

import string

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from common.config.document import ConfigError, ConfigProblem, document_load
from streams.config.engine import config_plan
from streams.core.ids import (
    MAX_EVENT_ID_BYTES,
    EventIdError,
    b64url_decode,
    b64url_encode,
    event_id_parse,
    key_event_id,
    progress_decode,
    progress_encode,
)
from streams.core.patterns import PatternError, pattern_compile
from streams.core.sse import checkpoint_frame, event_body, event_frame, preamble
from streams.core.templating import ExpansionContext, TemplateError, template_compile
from tests.fuzz.conftest import TRIED
from tests.support.sse_client import EventParser

offsets = st.integers(min_value=0, max_value=2**62)
progress_maps = st.dictionaries(st.integers(min_value=0, max_value=100_000), offsets, max_size=20)
names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
segments = st.text(alphabet=string.ascii_letters + string.digits + "-._~%", min_size=1, max_size=12)


# -- event ids ------------------------------------------------------------------------


@given(progress_maps)
def test_progress_round_trips(progress: dict[int, int]) -> None:
    TRIED["ids: progress round trip"] += 1
    assert progress_decode(progress_encode(progress)) == progress


@given(progress_maps, st.one_of(st.none(), st.binary(max_size=64)), st.text(max_size=40))
def test_every_id_form_round_trips(progress: dict[int, int], key: bytes | None, etag: str) -> None:
    TRIED["ids: id forms round trip"] += 1
    etag = etag.replace("/", "")
    token = progress_encode(progress)
    plain = token + (f"/{etag}" if etag else "")
    assume(len(plain.encode()) <= MAX_EVENT_ID_BYTES)
    parsed = event_id_parse(plain)
    assert (parsed.progress, parsed.etag) == (progress, etag or None)
    keyed = key_event_id(key, token)
    assume(len(keyed.encode()) <= MAX_EVENT_ID_BYTES)
    parsed = event_id_parse(keyed)
    assert (parsed.progress, parsed.key) == (progress, key)


@given(st.one_of(st.text(max_size=2000), st.binary(max_size=300).map(lambda b: b.decode("latin-1"))))
def test_any_text_as_an_id_parses_or_is_an_event_id_error(text: str) -> None:
    TRIED["ids: arbitrary text"] += 1
    try:
        parsed = event_id_parse(text)
    except EventIdError:
        return
    assert all(p >= 0 and o >= 0 for p, o in parsed.progress.items())


@given(st.binary(max_size=200))
def test_any_bytes_behind_a_valid_base64_are_decoded_or_refused(raw: bytes) -> None:
    TRIED["ids: arbitrary progress bytes"] += 1
    with pytest.raises(EventIdError) if not raw or raw[0] != 1 else _maybe_error():
        progress_decode(b64url_encode(raw))


class _maybe_error:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> bool:
        return kind is not None and issubclass(kind, EventIdError)


@given(st.text(max_size=200))
def test_b64url_decode_is_total(text: str) -> None:
    TRIED["ids: base64url"] += 1
    try:
        raw = b64url_decode(text)
    except EventIdError:
        return
    assert b64url_decode(b64url_encode(raw)) == raw


# -- path patterns ----------------------------------------------------------------------


@given(st.text(max_size=80), st.text(max_size=80))
def test_any_pattern_compiles_or_is_a_pattern_error_and_matching_is_total(source: str, path: str) -> None:
    TRIED["patterns: arbitrary pattern and path"] += 1
    try:
        pattern = pattern_compile(source)
    except PatternError:
        return
    found = pattern.match(path)
    assert found is None or set(found) == set(pattern.params)


@given(st.lists(st.tuples(segments, st.booleans()), min_size=1, max_size=6), st.data())
def test_a_path_built_for_a_pattern_matches_it_with_its_values(
    parts: list[tuple[str, bool]], data: st.DataObject
) -> None:
    TRIED["patterns: built paths"] += 1
    source, path, expected = "", "", {}
    for index, (literal, is_param) in enumerate(parts):
        if is_param:
            name = f"p{index}"
            value = data.draw(segments)
            source += "/{" + name + "}"
            path += "/" + value
            expected[name] = value
        else:
            source += "/" + literal
            path += "/" + literal
    assert pattern_compile(source).match(path) == expected


# -- templates --------------------------------------------------------------------------


@given(st.text(max_size=100))
def test_any_template_compiles_or_is_a_template_error(source: str) -> None:
    TRIED["templating: arbitrary text"] += 1
    try:
        template = template_compile(source)
    except TemplateError:
        return
    context = ExpansionContext({name: "v" for name in template.params}, identity="me", attributes={})
    try:
        template.expand(context)
    except TemplateError:
        assert any(ref and ref[0] == "attributes" for _, ref in template.parts)


literals = st.text(max_size=10).filter(lambda t: "$" not in t)


@given(st.lists(st.tuples(literals, names, st.text(max_size=10)), max_size=5), literals)
def test_expansion_puts_each_value_in_place(parts: list[tuple[str, str, str]], tail: str) -> None:
    TRIED["templating: built templates"] += 1
    source, expected, params = "", "", {}
    for literal, name, value in parts:
        params.setdefault(name, value)
        source += literal + "${params." + name + "}"
        expected += literal + params[name]
    assert template_compile(source + tail).expand(ExpansionContext(params)) == expected + tail


# -- SSE framing ------------------------------------------------------------------------


@given(st.text(max_size=300), st.one_of(st.none(), st.text(max_size=30)), st.text(max_size=60))
def test_frames_parse_back_to_what_was_sent(data: str, event: str | None, event_id: str) -> None:
    TRIED["sse: frames"] += 1
    frame = event_frame(event_id, event_body(data, event))
    parser = EventParser()
    (parsed,) = parser.feed(frame)
    clean_id = event_id.replace("\r", "").replace("\n", "").replace("\x00", "")
    assert parsed.id == clean_id
    assert parsed.data == data.replace("\r\n", "\n").replace("\r", "\n")
    clean_event = (event or "").replace("\r", "").replace("\n", "").replace("\x00", "")
    assert parsed.type == (clean_event or "message")
    # A frame never ends early: exactly one blank line, at its end.
    assert frame.endswith(b"\n\n")
    assert b"\n\n" not in frame[:-2].replace(b"\r", b"")


@given(st.text(max_size=60), st.one_of(st.none(), st.integers(min_value=0, max_value=10**9)))
def test_checkpoints_and_preambles_fire_no_event(event_id: str, retry: int | None) -> None:
    TRIED["sse: checkpoints"] += 1
    parser = EventParser()
    events = parser.feed(preamble(retry, event_id) + checkpoint_frame(event_id))
    assert all(not e.has_data for e in events)
    assert parser.retry == retry


# -- configuration files ----------------------------------------------------------------

yaml_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=20), st.floats(allow_nan=False))
yaml_values = st.recursive(
    yaml_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)),
    max_leaves=20,
)
section_items = st.dictionaries(
    st.sampled_from(["path", "topic", "name", "guard", "roles", "filters", "initial", "kind", "keys", "order"]),
    yaml_values,
    max_size=6,
)
documents = st.dictionaries(
    st.sampled_from(["routes", "topics", "guards", "schemas", "bindings", "asyncapi", "other"]),
    st.one_of(st.lists(section_items, max_size=3), yaml_values),
    max_size=3,
)


def config_problems(text: str) -> list[ConfigProblem] | None:
    """The problems found in ``text`` as a configuration file, or None if it plans cleanly."""
    try:
        config_plan(document_load(text, "fuzz.yaml"))
    except ConfigError as error:
        return error.problems
    return None


@given(st.text(max_size=400))
def test_any_text_as_a_config_file_loads_or_is_a_config_error(text: str) -> None:
    TRIED["config: arbitrary text"] += 1
    problems = config_problems(text)
    assert problems is None or (problems and all(p.filename == "fuzz.yaml" for p in problems))


@given(documents)
def test_any_structure_plans_or_names_its_problems(data: dict[str, object]) -> None:
    import yaml

    TRIED["config: arbitrary structures"] += 1
    problems = config_problems(yaml.safe_dump(data))
    assert problems is None or (problems and all(p.filename == "fuzz.yaml" for p in problems))
