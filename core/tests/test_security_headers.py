"""Console pages carry a Content-Security-Policy their templates can live with, and
console sessions are short."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
# Inline code the policy (script-src 'self'; style-src 'self') would refuse to run.
INLINE = [
    (re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I), "inline <script>"),
    (re.compile(r"\son[a-z]+\s*=", re.I), "inline event handler"),
    (re.compile(r"<style\b", re.I), "inline <style>"),
    (re.compile(r"\sstyle\s*=", re.I), "style attribute"),
    (re.compile(r"javascript:", re.I), "javascript: URL"),
]


def test_console_pages_send_a_policy_allowing_only_own_scripts(world, client):
    client.force_login(world.admin)
    for url in ("/login/", "/", "/memories/", "/graph/", "/audit/", "/admin/login/"):
        response = client.get(url)
        assert response.status_code in (200, 302, 404), url  # error pages are HTML too
        policy = response.headers.get("Content-Security-Policy", "")
        assert "script-src 'self'" in policy and "object-src 'none'" in policy, url
        assert "unsafe-inline" not in policy and "unsafe-eval" not in policy


def test_api_json_carries_no_html_policy(world, as_agent):
    response = as_agent(world.agent).get("/v1/me")
    assert response.status_code == 200
    assert "Content-Security-Policy" not in response.headers


def test_no_template_has_inline_code():
    found = []
    for path in sorted((ROOT / "templates").rglob("*.html")):
        text = path.read_text(encoding="utf-8")
        for pattern, what in INLINE:
            for match in pattern.finditer(text):
                found.append(f"{path.relative_to(ROOT)}: {what}: {match.group(0)!r}")
    assert found == []


def test_htmx_does_not_inject_its_indicator_style():
    base = (ROOT / "templates" / "base.html").read_text(encoding="utf-8")
    assert '"includeIndicatorStyles":false' in base
    assert ".htmx-indicator" in (ROOT / "static" / "css" / "console.css").read_text(encoding="utf-8")


def test_swapped_content_is_live_as_soon_as_it_is_shown():
    """htmx binds the triggers of swapped-in content when it settles, 20 ms after the
    swap by default: a change made in between (a quick user, a browser test) was lost.
    The console has no settle transitions, so it settles in the swap itself."""
    base = (ROOT / "templates" / "base.html").read_text(encoding="utf-8")
    assert '"defaultSettleDelay":0' in base
    css = (ROOT / "static" / "css" / "console.css").read_text(encoding="utf-8")
    assert "htmx-settling" not in css and "htmx-added" not in css


def test_the_api_docs_page_loads_its_script_from_a_file(world, client):
    client.force_login(world.admin)
    page = client.get("/v1/docs")
    assert page.status_code == 200
    assert not re.search(rb"<script(?![^>]*\bsrc=)[^>]*>", page.content)


def test_console_sessions_last_eight_hours_by_default(world, client):
    assert settings.SESSION_COOKIE_AGE == 8 * 3600
    response = client.post("/login/", {"username": "tadmin", "password": "pw-for-tests"})
    assert response.status_code == 302
    assert client.session.get_expiry_age() == 8 * 3600
    cookie = response.cookies[settings.SESSION_COOKIE_NAME]
    assert int(cookie["max-age"]) == 8 * 3600
