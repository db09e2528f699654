"""tests/test_receipt_diversity.py on a real coordinator (DNA_TEST_CITUS_DSN; deselected without it):
receipts pin the diversity they ran with, and one that recorded none replays as its release answered, with
dna.take_receipt and dna.replay delegated to the scope's node."""
from test_receipt_diversity import (docs, test_a_receipt_records_the_diversity_it_ran_with,  # noqa: F401
                                    test_a_receipt_with_no_diversity_replays_as_its_release_answered,
                                    test_receipt_diversity_in_sql)
