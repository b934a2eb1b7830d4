from rest_framework import serializers

from core.fields import BoundedCharField


class Named(serializers.Serializer):
    name = BoundedCharField(max_length=5)


def test_length_is_bounded_before_whitespace_is_trimmed():
    assert not Named(data={"name": "\u0085abcde"}).is_valid()  # 6 sent, over the limit
    assert not Named(data={"name": " abcde"}).is_valid()
    ok = Named(data={"name": " abc "})
    assert ok.is_valid() and ok.validated_data["name"] == "abc"
