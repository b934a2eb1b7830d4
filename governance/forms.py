from django import forms


class AgentForm(forms.Form):
    name = forms.CharField(max_length=100, label="Agent name")
    description = forms.CharField(max_length=2000, required=False, widget=forms.Textarea(attrs={"rows": 2}))


class KeyForm(forms.Form):
    name = forms.CharField(max_length=100, label="Key name", initial="default")
