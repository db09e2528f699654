"""``dna reindex --model <model_id> --scope <scope>``: embed exactly what a model lacks, memories and documents (pydna.reindex)."""
from __future__ import annotations

from typing import Annotated

import typer

from pydna.cli_common import CliError, database_dsn, echo_json


def reindex(
    ctx: typer.Context,
    model: Annotated[str, typer.Option("--model", help="The model_id to embed the scope's memories under.")],
    scope: Annotated[str, typer.Option("--scope", help="The scope to re-embed.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Embed the memories and documents of SCOPE that MODEL has no vector for (dna.reconcile ... 'reembed'),
    and write them (a document with all its passages and its metadata)."""
    import psycopg

    from pydna.embeddings.select import provider_for_model
    from pydna.reindex import reindex as run

    choice = provider_for_model(model)
    if choice is None:
        raise CliError(f"no embedder of this package produces {model!r} vectors (fake: dna-fake-hash-v1; "
                       "ONNX: install pydna[onnx])")
    with psycopg.connect(database_dsn(ctx), autocommit=True) as conn:
        result = run(conn, scope, choice.provider)
    if as_json:
        echo_json(result)
    else:
        typer.echo(f"{result['written']} of {result['to_embed']} memories and {result['documents']} documents "
                   f"({result['passages']} passages) of {scope} embedded under {model}")
