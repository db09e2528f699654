def test_migrated(sql):
    assert sql.execute("select count(*) from dna.dna_kinds").fetchone()[0] == 5   # Engram, Research, Evidence, Turn, Episode
