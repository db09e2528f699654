"""dna.scope_model's two index probes (revision 0024_at_scale, topic scope_model) on a real coordinator
(DNA_TEST_CITUS_DSN; deselected without it): the model a search reads without a model_id is the one the
count of dna.scope_models names, for one model, several in one width, two widths and none, and a search
without model_id answers as one naming it. The single-node tests' own assertions (the rows-read check
stays single-node: a coordinator's statistics do not see its workers' shards)."""
from __future__ import annotations

from test_scope_model import (  # noqa: F401
    test_an_empty_or_unknown_scope_has_no_model,
    test_models_of_two_widths_and_the_width_filter,
    test_search_without_model_id_reads_the_scopes_model,
    test_several_models_in_one_width_match_the_count,
)
