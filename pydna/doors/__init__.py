"""Agent doors: the memory verbs over MCP (``dna mcp``) and REST (``dna serve``).

Both doors call the same SQL verbs through :mod:`pydna.doors.verbs` (one verb function per call,
with the client's embeddings), so refusals, row-level security and personal memory are the
database's, exactly as from psql:

- :mod:`pydna.doors.mcp_server` — an MCP server on the official ``mcp`` SDK (extra ``mcp``); the
  identity is the database role of the server's own connection.
- :mod:`pydna.doors.rest` — a FastAPI app (extra ``rest``); each request's API key maps to a
  database role (:mod:`pydna.doors.keys`) and its SQL runs in one transaction after
  ``SET LOCAL ROLE`` that role.
- :mod:`pydna.doors.cli` — the ``dna mcp`` and ``dna serve`` commands (imports neither SDK until run).
"""
