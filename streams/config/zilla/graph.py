"""The bindings of a zilla.yaml as a graph: who exits to whom, and who reaches whom."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from common.config.document import DocPath, Translation, path_text


def binding_exits(binding: dict[str, Any]) -> list[str]:
    out = [binding["exit"]] if isinstance(binding.get("exit"), str) else []
    for route in binding.get("routes") or []:
        if isinstance(route, dict) and isinstance(route.get("exit"), str):
            out.append(route["exit"])
    return out


class ZillaGraph:
    """The bindings of a zilla.yaml and who exits to whom."""

    def __init__(self, bindings: dict[str, Any]) -> None:
        self.bindings = {name: b for name, b in bindings.items() if isinstance(b, dict)}
        self.entries: dict[str, list[str]] = {name: [] for name in self.bindings}
        for name, binding in self.bindings.items():
            for exit_name in binding_exits(binding):
                self.entries.setdefault(exit_name, []).append(name)

    def kind(self, name: str) -> tuple[str, str]:
        binding = self.bindings.get(name, {})
        return str(binding.get("type", "")), str(binding.get("kind", ""))

    def http_whens(self, name: str, *, direct: bool = False) -> Iterator[tuple[DocPath, dict[str, Any]]]:
        """The ``when`` headers of http server routes to ``name`` (their exit, or through other bindings).

        Each with its YAML path; a route without ``when`` gives one empty condition.
        """
        for server in self.upstream_of(name, ("http", "server")):
            for index, route in enumerate(self.bindings[server].get("routes") or []):
                if not isinstance(route, dict):
                    continue
                target = str(route.get("exit"))
                if not (target == name if direct else self.leads_to(target, name)):
                    continue
                for number, when in enumerate(route.get("when") or [{}]):
                    headers = (when.get("headers") or {}) if isinstance(when, dict) else {}
                    yield ("bindings", server, "routes", index, "when", number, "headers"), headers

    def leads_to(self, start: str, target: str) -> bool:
        """Whether requests entering binding ``start`` reach ``target`` (any number of hops)."""
        return start == target or start in self.upstream_of(target, self.kind(start))

    def upstream_of(self, name: str, kind: tuple[str, str]) -> list[str]:
        """Bindings of ``kind`` from which requests reach ``name`` (any number of hops)."""
        seen, todo, found = {name}, [name], []
        while todo:
            for entry in self.entries.get(todo.pop(), []):
                if entry in seen:
                    continue
                seen.add(entry)
                todo.append(entry)
                if self.kind(entry) == kind:
                    found.append(entry)
        return found


def skip_once(translation: Translation, at: DocPath, reason: str) -> None:
    if all(where != path_text(at) for where, _ in translation.skipped):
        translation.skip(at, reason)
