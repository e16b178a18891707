"""The README's list of demos is what `python demos/regenerate.py` writes: each demo's README_ENTRY
filled with the numbers recorded in docs/pictures/results.json, so editing the README, a template
or the numbers alone fails here; and every picture the README shows exists. No demo runs here."""
import json

import regenerate


def recorded():
    return json.loads(regenerate.RESULTS.read_text())


def test_every_demo_has_recorded_numbers_and_no_other():
    assert sorted(recorded()) == regenerate.demo_names()


def test_the_readme_demo_list_is_the_templates_filled_with_the_recorded_numbers():
    _, section, _ = regenerate.split_readme(regenerate.README.read_text())
    assert section == regenerate.readme_section(recorded())


def test_every_picture_the_readme_shows_exists_and_docs_pictures_holds_no_other():
    linked = {regenerate.ROOT / path
              for path in regenerate.pictures_linked(regenerate.README.read_text())}
    assert linked and all(path.is_file() for path in linked)
    assert set(regenerate.PICTURES.iterdir()) == linked | {regenerate.RESULTS}
