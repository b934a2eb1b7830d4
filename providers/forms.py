from django import forms

from providers.adapters.registry import provider_kinds
from providers.models import AccessControl


class EngineForm(forms.Form):
    id = forms.SlugField(max_length=63, label="Engine id")
    provider = forms.ChoiceField(choices=[])
    base_url = forms.URLField(max_length=500, label="Base URL", assume_scheme="https")
    tenant = forms.SlugField(required=False, label="Dedicated to tenant (slug; empty = shared)")
    access_control = forms.ChoiceField(choices=AccessControl.choices, initial=AccessControl.PLATFORM_KEY)
    credential_ref = forms.CharField(max_length=500, required=False, label="Platform credential reference")
    timeout_seconds = forms.FloatField(min_value=0.1, max_value=120, initial=10, label="Timeout (s)")

    def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.fields["provider"].choices = [(kind, kind) for kind in provider_kinds()]


class CredentialForm(forms.Form):
    credential_ref = forms.CharField(
        max_length=500,
        label="Credential reference",
        help_text="env://FEDMEM_CRED_… or openbao://mount/path#key",
    )
