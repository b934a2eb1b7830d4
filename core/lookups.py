"""``field__any=[...]``: the field equals an element of one array parameter.

``__in`` compiles one placeholder per element, so compiling a statement over a few
hundred ids costs the ORM milliseconds and its text changes with every length; PostgreSQL
plans ``x IN (a, b, c)`` as ``x = ANY('{a,b,c}')`` anyway. ``__any`` writes that form
directly: one placeholder whatever the length, the same plans.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Field, ForeignObject, Lookup


class AnyOf(Lookup):  # type: ignore[type-arg]
    lookup_name = "any"
    prepare_rhs = False

    def get_prep_lookup(self) -> list[Any]:
        if isinstance(self.rhs, (str, bytes)) or not hasattr(self.rhs, "__iter__"):
            raise TypeError(f"{self.lookup_name} needs a list of values, not {type(self.rhs).__name__}")
        field = self.lhs.output_field
        return [field.get_prep_value(v) for v in self.rhs]

    def get_db_prep_lookup(self, value: Any, connection: Any) -> tuple[str, list[Any]]:
        field = self.lhs.output_field
        return "%s", [[field.get_db_prep_value(v, connection, prepared=True) for v in value]]

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        # A foreign key's column type is its target's (uuid, bigint): the cast also types
        # an empty list, which PostgreSQL could not infer alone.
        cast = self.lhs.output_field.db_type(connection)
        return f"{lhs} = ANY({rhs}::{cast}[])", [*lhs_params, *rhs_params]


def register() -> None:
    # Relations keep lookups of their own (a foreign key's ``item_id__any``).
    for field in (Field, ForeignObject):
        field.register_lookup(AnyOf)
