from typing import Any

from django import forms

from core.vocabulary import CLASSIFICATION_NAMES, Kind, RecordKind, Scope
from governance.models import AgentPolicyVersion, Candidate, ErasureRequest, LegalHold
from governance.policy import ISOLATION_LEVELS, MAX_RECALL_TOP_K, MemoryPolicy, PolicyModes


class AgentForm(forms.Form):
    name = forms.CharField(max_length=100, label="Agent name")
    description = forms.CharField(max_length=2000, required=False, widget=forms.Textarea(attrs={"rows": 2}))


class KeyForm(forms.Form):
    name = forms.CharField(max_length=100, label="Key name", initial="default")


# --- compliance pages -------------------------------------------------------------


def _choices(values: list[str]) -> list[tuple[str, str]]:
    return [(v, v) for v in values]


class CandidateFilterForm(forms.Form):
    provider = forms.CharField(max_length=63, required=False, label="Provider")
    kind = forms.ChoiceField(
        choices=[("", "any"), *_choices(RecordKind.values)], required=False, label="Kind"
    )
    status = forms.ChoiceField(
        choices=[("", "any"), *_choices(Candidate.Status.values)], required=False, label="Status"
    )
    subject = forms.CharField(max_length=128, required=False, label="Subject")


class ReviewForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approve", "approve"), ("reject", "reject")])
    reason = forms.CharField(max_length=1000, label="Reason")


class CandidateImportForm(forms.Form):
    agent = forms.UUIDField(label="Agent")
    engine = forms.CharField(max_length=63, label="Engine")
    subject = forms.CharField(max_length=128, label="Subject")
    limit = forms.IntegerField(min_value=1, max_value=5000, required=False, initial=500, label="Limit")


class HoldForm(forms.Form):
    target = forms.ChoiceField(choices=LegalHold.Target.choices, label="Target")
    subject = forms.CharField(max_length=128, required=False, label="Subject (user id)")
    agent = forms.UUIDField(required=False, label="Agent")
    scope = forms.ChoiceField(choices=[("", "—"), *_choices(Scope.values)], required=False, label="Scope")
    dataset = forms.CharField(max_length=200, required=False, label="Dataset")
    item = forms.UUIDField(required=False, label="Memory item id")
    reason = forms.CharField(max_length=1000, label="Reason")


class ReleaseForm(forms.Form):
    reason = forms.CharField(max_length=1000, label="Release reason")


class ErasureForm(forms.Form):
    """A subject, datasets, or both (the service refuses neither, with its own code)."""

    subject = forms.CharField(max_length=128, required=False, label="Subject (user id)")
    # Comma- or newline-separated dataset names; the service checks each (bounds,
    # duplicates, known in the tenant) exactly as for the API.
    datasets = forms.CharField(max_length=6000, required=False, label="Datasets")
    scope = forms.ChoiceField(choices=ErasureRequest.Scope.choices, label="Scope")
    agent = forms.UUIDField(required=False, label="Agent (scope agent)")
    reason = forms.CharField(max_length=1000, label="Reason")

    def clean_datasets(self) -> list[str]:
        return _csv(self.cleaned_data.get("datasets", "").replace("\n", ","))


def _csv(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


class RetentionForm(forms.Form):
    retention_days = forms.IntegerField(min_value=1, required=False, label="Retention (days)")
    idle_days = forms.IntegerField(min_value=1, required=False, label="Idle retention (days)")


MODE_NAMES = [f.name for f in PolicyModes.__dataclass_fields__.values()]


class PolicyForm(forms.Form):
    """The whole policy as form fields; :meth:`policy` gives the JSON the service validates."""

    engine = forms.ChoiceField(choices=AgentPolicyVersion.Engine.choices, label="Engine")
    mem0_instance = forms.CharField(max_length=63, required=False, label="Mem0 instance")
    cognee_instance = forms.CharField(max_length=63, required=False, label="Cognee instance")
    modes = forms.MultipleChoiceField(
        choices=_choices(MODE_NAMES), required=False, widget=forms.CheckboxSelectMultiple, label="Modes"
    )
    write_scopes = forms.MultipleChoiceField(
        choices=_choices(Scope.values),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Write scopes",
    )
    read_scopes = forms.MultipleChoiceField(
        choices=_choices(Scope.values),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Read scopes",
    )
    default_scope = forms.ChoiceField(choices=_choices(Scope.values), label="Default scope")
    allowed_kinds = forms.MultipleChoiceField(
        choices=_choices(Kind.values),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Allowed kinds",
    )
    max_classification = forms.ChoiceField(choices=_choices(CLASSIFICATION_NAMES), label="Max classification")
    allow_personal_data = forms.BooleanField(required=False, label="Allow personal data")
    legal_hold = forms.BooleanField(required=False, label="Legal hold on every write")
    infer = forms.BooleanField(required=False, label="Infer (extract facts)")
    global_access = forms.BooleanField(required=False, label="Global access")
    retention_days = forms.IntegerField(min_value=1, required=False, label="Retention (days)")
    idle_days = forms.IntegerField(min_value=1, required=False, label="Idle retention (days)")
    shared_with = forms.CharField(required=False, label="Shared with (agent ids, comma-separated)")
    teams = forms.CharField(required=False, label="Teams (comma-separated)")
    projects = forms.CharField(required=False, label="Projects (comma-separated)")
    required_isolation = forms.ChoiceField(
        choices=_choices(list(ISOLATION_LEVELS)), label="Required isolation"
    )
    recall_top_k = forms.IntegerField(min_value=1, max_value=MAX_RECALL_TOP_K, label="Recall top k")
    note = forms.CharField(max_length=500, required=False, label="Change note")

    @classmethod
    def initial_from(
        cls, *, engine: str, mem0_instance: str, cognee_instance: str, policy: MemoryPolicy
    ) -> dict[str, Any]:
        data = policy.to_json()
        initial = {key: value for key, value in data.items() if key in cls.base_fields}
        initial["modes"] = [name for name, on in data["modes"].items() if on]
        for key in ("shared_with", "teams", "projects"):
            initial[key] = ", ".join(data[key])
        initial.update(engine=engine, mem0_instance=mem0_instance, cognee_instance=cognee_instance)
        return initial

    def policy(self) -> dict[str, Any]:
        data = self.cleaned_data
        policy = {
            key: data[key]
            for key in (
                "write_scopes", "read_scopes", "default_scope", "allowed_kinds", "max_classification",
                "allow_personal_data", "legal_hold", "infer", "global_access", "retention_days",
                "idle_days", "required_isolation", "recall_top_k",
            )
        }  # fmt: skip
        policy["modes"] = {name: name in data["modes"] for name in MODE_NAMES}
        for key in ("shared_with", "teams", "projects"):
            policy[key] = _csv(data[key])
        return policy
