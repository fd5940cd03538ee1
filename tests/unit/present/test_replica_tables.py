"""The replicas of a candidate per cell, as the run's report shows them: each replica's tokens and hit rate, the
balance, and the share of the ideal prefix cache the routing kept."""

from servebook.present.load_tables import cell_tables
from servebook.present.replica_tables import replica_table

AGENTS = {"cell_id": "agents", "kind": "agents", "category": "prose", "concurrency": 3, "valid": True,
          "reconciliation": "ok", "invalid_reasons": "", "replicas_serving": 2, "replica_requests": None,
          "replica_generation_tokens": "[40, 56]", "replica_hit_rates": "[0.52, null]", "replica_balance": 0.83,
          "cache_kept": 0.61}


def test_every_replica_is_shown_side_by_side_with_the_share_of_the_cache_kept():
    table = replica_table([AGENTS])
    assert table is not None and table.title == "Replicas per cell"
    assert table.rows[0].values == ["agents", "2", "router", "40 / 56", "52% / -", "0.83", "61%"]
    assert any(t.title == "Replicas per cell" for t in cell_tables([AGENTS])), "the run's report carries it"


def test_one_engine_has_no_replica_table_and_servebooks_own_choices_are_counted():
    assert replica_table([{**AGENTS, "replica_generation_tokens": None}]) is None
    spread = replica_table([{**AGENTS, "replica_requests": "[5, 7]", "cache_kept": None}])
    assert spread.rows[0].values[2] == "5 / 7" and spread.rows[0].values[-1] == "-"
