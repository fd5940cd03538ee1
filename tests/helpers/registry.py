"""The engine registry, watched: how often a run looks its engine adapter up."""

from servebook.engines import registry as engines  # the module that holds the registry


class CountingRegistry(dict):
    """The engine registry, counting each look-up by kind."""

    def __init__(self, registry):
        super().__init__(registry)
        self.looked_up: list[str] = []

    def __getitem__(self, kind):
        self.looked_up.append(kind)
        return super().__getitem__(kind)


def count_lookups(monkeypatch) -> CountingRegistry:
    """Every get_engine from here on is counted (monkeypatch puts the registry back after the test)."""
    registry = CountingRegistry(engines._REGISTRY)
    monkeypatch.setattr(engines, "_REGISTRY", registry)
    return registry
