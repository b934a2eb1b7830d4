"""Stored embeddings read in pgvector's binary form.

``vector_send`` gives a vector as two 16-bit big-endian words (dimensions, a reserved
zero) followed by its big-endian float32s: the stored values as they are. The text
form the ORM reads instead (``[0.0123,...]``) is parsed into Python floats one by one,
which for a few hundred 384-dimension vectors took tens of milliseconds. The floats
are the same: the text form is the shortest decimal that reads back as the stored
float32 (pinned in ``test_ranking``), so a caller that computes in float32, as the
rank and the chain walk do, sees the same bits either way.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from django.db import connection
from django.db.models import BinaryField, Model
from django.db.models.expressions import RawSQL

_HEADER = 4  # dimensions and the reserved word, two bytes each


def stored_vectors(
    model: type[Model], ids: list[Any], column: str = "embedding"
) -> tuple[list[Any], np.ndarray]:
    """The ids among ``ids`` that have a row, in id order, and their ``column``
    vectors as the rows of one float32 matrix (0 x 0 when none has a row; a row whose
    vector is NULL is left out)."""
    meta = model._meta
    pk = meta.pk
    assert pk is not None
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {quote(pk.column)}, vector_send({quote(meta.get_field(column).column)}) "  # noqa: S608 - names from the model
            f"FROM {quote(meta.db_table)} WHERE {quote(pk.column)} = ANY(%s::{pk.db_type(connection)}[]) "
            f"AND {quote(meta.get_field(column).column)} IS NOT NULL ORDER BY 1",
            [list(ids)],
        )
        rows = cursor.fetchall()
    if not rows:
        return [], np.zeros((0, 0), dtype=np.float32)
    # Every row has the column's dimensions.
    matrix = np.vstack([_floats(data) for _pk, data in rows])
    return [key for key, _data in rows], matrix.astype(np.float32)


def _floats(data: bytes | memoryview) -> np.ndarray:
    return np.frombuffer(bytes(data), dtype=">f4", offset=_HEADER)


def sent_column(table: str, column: str) -> RawSQL:
    """``vector_send`` of ``table.column``, as an annotation: a statement that reads
    other fields reads the vector with them (decoded by :func:`from_sent`)."""
    quote = connection.ops.quote_name
    return RawSQL(f"vector_send({quote(table)}.{quote(column)})", [], output_field=BinaryField())  # noqa: S611 - names from the model


def from_sent(data: bytes | memoryview | None) -> np.ndarray | None:
    """One vector of ``vector_send``'s binary form, as float32 (None for NULL)."""
    if data is None:
        return None
    return _floats(data).astype(np.float32)


# pgvector's cosine distance, the operator of every nearest-neighbour search here.
DISTANCE = "<=>"
# Written into a statement that computes distances of rows it chose otherwise (by id,
# from arrays it was given) and searches no nearest neighbour: the cursor class below
# lets it be prepared like any other statement.
CHOSEN_ROWS = "/* distances of chosen rows only */"


@functools.cache
def planned_per_run(base: type) -> type:
    """``base`` (a psycopg cursor class) that never prepares a statement using
    :data:`DISTANCE` (unless it is marked :data:`CHOSEN_ROWS`), so PostgreSQL plans
    it for its values on every run.

    A nearest-neighbour search under a tenant's or an agent's filter is fast through
    the HNSW index for a large tenant and through an exact scan of the few rows of a
    small one, and the planner picks by the row count it expects for the values
    given. A prepared statement may switch to one generic plan, made for an average
    tenant, after five runs; for a small tenant an HNSW plan then walks the graph until
    ``hnsw.max_scan_tuples`` and can return fewer rows than an exact scan would, and
    for a large one an exact plan reads every vector. Every other statement is
    prepared as the connection's settings say (FEDMEM_DB_PREPARE_THRESHOLD). A
    statement is a search unless it says otherwise: a search that forgot the mark
    would change answers, a marked one only saves its planning."""
    if getattr(base, "plans_vector_searches_per_run", False):
        return base  # wrapped already

    class PlannedPerRun(base):
        plans_vector_searches_per_run = True

        def execute(
            self, query: Any, params: Any = None, *, prepare: bool | None = None, **kwargs: Any
        ) -> Any:
            if prepare is None and isinstance(query, str) and DISTANCE in query and CHOSEN_ROWS not in query:
                prepare = False
            return super().execute(query, params, prepare=prepare, **kwargs)

    PlannedPerRun.__name__ = PlannedPerRun.__qualname__ = f"PlannedPerRun{base.__name__}"
    return PlannedPerRun
