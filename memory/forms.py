"""Console forms of the memory pages: the browser's filters, trace and what-if input."""

from __future__ import annotations

from typing import Any

from django import forms

from core.vocabulary import Classification, Kind, Scope

VALIDITY_CHOICES = [
    ("current", "current"),
    ("superseded", "superseded (retired)"),
    ("all", "current and retired"),
]
MODE_CHOICES = [("text", "full text"), ("semantic", "semantic (ranked)")]


class BrowseForm(forms.Form):
    q = forms.CharField(required=False, max_length=500, label="Search")
    mode = forms.ChoiceField(required=False, choices=MODE_CHOICES, label="Search mode")
    agent = forms.ChoiceField(required=False, label="Agent")
    scope = forms.ChoiceField(required=False, choices=[("", "any"), *Scope.choices], label="Scope")
    kind = forms.ChoiceField(required=False, choices=[("", "any"), *Kind.choices], label="Kind")
    classification = forms.TypedChoiceField(
        required=False,
        coerce=int,
        empty_value=None,
        choices=[("", "any"), *Classification.choices],
        label="Classification",
    )
    session = forms.CharField(required=False, max_length=128, label="Session")
    validity = forms.ChoiceField(required=False, choices=VALIDITY_CHOICES, label="Validity")
    as_of = forms.DateTimeField(
        required=False,
        label="As of",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local", "step": "1"}),
    )

    def __init__(self, *args: Any, agents: tuple[Any, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["agent"].choices = [
            ("", "every agent I may view"),
            *((str(a.pk), a.name) for a in agents),
        ]


class TraceForm(forms.Form):
    direction = forms.ChoiceField(choices=[("effects", "effects"), ("causes", "causes")], required=False)
    max_depth = forms.IntegerField(min_value=1, max_value=10, required=False, label="Depth")
    as_of = forms.DateTimeField(
        required=False,
        label="As of",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local", "step": "1"}),
    )


class WhatIfForm(forms.Form):
    origin = forms.CharField(max_length=500, label="Starting from", required=False)
    direction = forms.ChoiceField(choices=[("effects", "effects"), ("causes", "causes")], required=False)


class GraphWhyForm(forms.Form):
    q = forms.CharField(max_length=500, label="Query")
    agent = forms.UUIDField(label="Agent")


class GraphForm(forms.Form):
    item = forms.UUIDField(required=False)
    entity = forms.IntegerField(required=False, min_value=1)
    q = forms.CharField(required=False, max_length=500, label="Query")
    as_of = forms.DateTimeField(required=False)
